// Package testkit holds the helpers tests share: a clock a test sets and
// steps, and a poll for a condition that another goroutine brings about.
package testkit

import (
	"cmp"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// Clock is a clock that tests set and step; it has the UnixNano method of
// the clocks idgen and its products take. With a positive step every reading
// advances it, so that a generator spinning for a tick sees one come; a
// running clock also moves with real time, so that a generator parking for a
// tick sees it come after its sleep. It is safe for concurrent use.
type Clock struct {
	ns      atomic.Int64
	step    int64
	running bool
	start   time.Time
}

// NewClock returns a clock standing at t that moves by step with every
// reading (0: only when set).
func NewClock(t time.Time, step time.Duration) *Clock {
	c := &Clock{step: int64(step)}
	c.Set(t)
	return c
}

// NewRunningClock returns a clock at t that moves with real time.
func NewRunningClock(t time.Time) *Clock {
	c := &Clock{running: true, start: time.Now()}
	c.Set(t)
	return c
}

func (c *Clock) elapsed() int64 {
	if c.running {
		return int64(time.Since(c.start))
	}
	return 0
}

// UnixNano returns the clock's time, then moves it by its step.
func (c *Clock) UnixNano() int64 { return c.ns.Add(c.step) - c.step + c.elapsed() }

// Set sets the clock to t.
func (c *Clock) Set(t time.Time) { c.ns.Store(t.UnixNano() - c.elapsed()) }

// Add moves the clock by d, backwards for a negative d.
func (c *Clock) Add(d time.Duration) { c.ns.Add(int64(d)) }

// Now returns the clock's time without moving it.
func (c *Clock) Now() time.Time { return time.Unix(0, c.ns.Load()+c.elapsed()) }

// WaitFor polls cond until it holds: every millisecond at first, then less
// often, up to every 20ms, so that a condition a server answers costs it
// little. The minute's deadline only keeps a broken component from hanging
// the test; it times nothing.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for pause := time.Millisecond; !cond(); pause = min(2*pause, 20*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s after a minute", what)
		}
		time.Sleep(pause)
	}
}

// CheckUnique fails the test if ids holds a duplicate.
func CheckUnique[T cmp.Ordered](t testing.TB, ids []T) {
	t.Helper()
	s := slices.Clone(ids)
	slices.Sort(s)
	for i := 1; i < len(s); i++ {
		if s[i] == s[i-1] {
			t.Fatalf("duplicate ID %v among %d", s[i], len(s))
		}
	}
}

// CheckIncreasing fails the test unless ids increase strictly.
func CheckIncreasing[T cmp.Ordered](t testing.TB, ids []T) {
	t.Helper()
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("ID %d: %v after %v", i, ids[i], ids[i-1])
		}
	}
}
