package dedupe

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
