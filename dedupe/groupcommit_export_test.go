package dedupe

import (
	"context"
	"time"
)

// GroupCommitMaxInFlight is how many round trips of one kind a Store that
// WithGroupCommit returned has in flight at most.
const GroupCommitMaxInFlight = maxInFlight

// GroupCommitQueued reports how many calls wait, not yet sent, in the
// claim, completion and release queues of s, a Store that WithGroupCommit
// returned, so that tests can tell when calls have queued.
func GroupCommitQueued(s Store) (claims, completions, releases int) {
	g := s.(*groupCommit)
	return g.claims.queued(), g.completes.queued(), g.releases.queued()
}

// GroupCommitClaimsInFlight reports how many claim round trips s, a Store
// that WithGroupCommit returned, has in flight: a round trip sent from a
// sender goroutine counts until just after its callers have their answers.
func GroupCommitClaimsInFlight(s Store) int {
	l := &s.(*groupCommit).claims
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inFlight
}

func (l *lane[Q, R]) queued() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.queue {
		if c.state == queued {
			n++
		}
	}
	return n
}

// WithGroupCommit is the group commit a Guard with GroupCommit set wraps
// its store in, for tests of the wrapper alone.
func WithGroupCommit(s Store) Store { return withGroupCommit(s) }

// WithDoneCache is the cache a Guard with a DoneCache wraps its store in.
func WithDoneCache(s Store, size int) Store { return withDoneCache(s, size) }

// WithDeferredCompletions is the group commit of a Guard with
// LateFailure set: its completions answer before they are recorded, and
// report those the store fails.
func WithDeferredCompletions(s Store, report func(Ref, Result), timeout time.Duration) Store {
	g := withGroupCommit(s)
	g.deferCompletions(report, timeout)
	return g
}

// GroupCommitFlush is Guard.Flush for a Store WithDeferredCompletions
// returned.
func GroupCommitFlush(ctx context.Context, s Store) error { return s.(*groupCommit).flush(ctx) }

// MaxDeferred is how many completions are deferred at most.
const MaxDeferred = maxDeferred
