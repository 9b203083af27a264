package testkit

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// Received collects what a consumer of a test topic was given, from the
// client's goroutines, for a test to wait on.
type Received[M any] struct {
	mu   sync.Mutex
	msgs []M
}

// Add records msgs.
func (r *Received[M]) Add(msgs ...M) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, msgs...)
}

// Snapshot returns what was received so far.
func (r *Received[M]) Snapshot() []M {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.msgs)
}

// Await returns what was received once done says it is all, failing t
// with what if that takes over 30 s.
func (r *Received[M]) Await(t testing.TB, what string, done func([]M) bool) []M {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		msgs := r.Snapshot()
		if done(msgs) {
			return msgs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: received %d messages", what, len(msgs))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
