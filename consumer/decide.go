package consumer

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/adapter"
)

// decision is one row of the table: the action for an outcome, the
// counter it increments and, for outcomes someone must hear about, the log
// record.
type decision struct {
	act   adapter.Action
	count func(*counters) *atomic.Int64
	level slog.Level
	msg   string // empty: not logged
	fix   string
	// failed gives the message's span an error status: it was not
	// processed and is retried for a reason other than a busy key, or its
	// effect may have been applied twice or not recorded.
	failed bool
}

// decisions is the consumer's one decision table, indexed by outcome: it
// gives every outcome of the guard ([dedupe.Outcome]) the client's action,
// its [Stats] counter and, where someone must hear of it, a log record:
//
//	outcome      action  logged
//	completed    ack
//	suppressed   ack     debug (a duplicate, as designed)
//	failed       retry   (the handler's error is returned to the client)
//	busy         retry   only once waiting in process is spent, no sooner than the holder's lease ends
//	reused       retry   error (the key is recorded with another body)
//	store-down   retry   only once waiting in process for the store is spent (fail-closed; with FailOpen the handler runs: unguarded)
//	invalid-key  retry   error (no key, or one that cannot be stored)
//	lease-lost   ack     error (the effect may have been applied twice)
//	unrecorded   ack     error (the effect ran; its record failed)
//	unguarded    ack     warn
//	canceled     hold    (a drain: left for the queue's next owner)
//
// A lease-lost or unrecorded message is acknowledged because a retry
// cannot undo an effect that ran; alert on their counts. A store that is
// down is logged once when claims begin to fail and once when it answers
// again, not per message (see [WithStoreDownWait]). The package doc shows
// this table to users.
var decisions = [...]decision{
	dedupe.Completed: {act: adapter.Ack, count: func(s *counters) *atomic.Int64 { return &s.Completed }},
	// Dedupe working as designed: never louder than debug.
	dedupe.Suppressed: {act: adapter.Ack, count: func(s *counters) *atomic.Int64 { return &s.Suppressed },
		level: slog.LevelDebug, msg: "idemq: duplicate suppressed; its key was done before"},
	// The handler's own error: the caller logs it if it wants.
	dedupe.Failed: {act: adapter.Retry, failed: true, count: func(s *counters) *atomic.Int64 { return &s.Failed }},
	// Reached only once waiting in process stopped (see await).
	dedupe.Busy: {act: adapter.Retry, count: func(s *counters) *atomic.Int64 { return &s.Busy }},
	dedupe.Reused: {act: adapter.Retry, failed: true, count: func(s *counters) *atomic.Int64 { return &s.Reused },
		level: slog.LevelError, msg: "idemq: key reused for a different payload; not running the message, retrying it until the broker dead-letters it",
		fix: "give each payload its own key, or consumer.WithoutFingerprint() if one message's body changes between sends"},
	// Reached only once waiting in process for the store stopped (see
	// awaitStore). Not logged per message: the outage is, once when claims
	// begin to fail and once when the store answers again (outage.go).
	dedupe.StoreDown: {act: adapter.Retry, failed: true, count: func(s *counters) *atomic.Int64 { return &s.StoreDown }},
	dedupe.InvalidKey: {act: adapter.Retry, failed: true, count: func(s *counters) *atomic.Int64 { return &s.InvalidKey },
		level: slog.LevelError, msg: "idemq: message key cannot be deduplicated; retrying it until the broker dead-letters it",
		fix: "stamp messages with a client adapter's Producer (remoting, grpcv5), or configure consumer.WithKeyFallback"},
	// The effect ran and a retry cannot undo it: acknowledge, and make it
	// loud.
	dedupe.LeaseLost: {act: adapter.Ack, failed: true, count: func(s *counters) *atomic.Int64 { return &s.LeaseLost },
		level: slog.LevelError, msg: "idemq: lease lost while the handler ran; its effect may have been applied twice",
		fix: "lengthen dedupe.GuardConfig.Lease or make the handler faster; check the store's latency"},
	// A retry would run the effect again once the lease expires.
	dedupe.Unrecorded: {act: adapter.Ack, failed: true, count: func(s *counters) *atomic.Int64 { return &s.Unrecorded },
		level: slog.LevelError, msg: "idemq: handler succeeded but the store did not record it; a redelivery after the lease may run it again",
		fix: "check that the store is reachable"},
	dedupe.Unguarded: {act: adapter.Ack, count: func(s *counters) *atomic.Int64 { return &s.Unguarded },
		level: slog.LevelWarn, msg: "idemq: dedupe store failed; ran the handler without dedupe (fail-open)",
		fix: "check that the store is reachable"},
	dedupe.Canceled: {act: adapter.Hold, count: func(s *counters) *atomic.Int64 { return &s.Canceled }},
}

// decide counts, logs and returns the action for msg, whose key is key
// ("" when it has none) and whose guard answered r.
func (c *Consumer) decide(ctx context.Context, msg *Message, key string, r dedupe.Result) adapter.Action {
	if int(r.Outcome) >= len(decisions) || decisions[r.Outcome].act == 0 {
		// Unreachable while the table covers every outcome (a test checks
		// it); retrying loses nothing.
		c.logger.ErrorContext(ctx, "idemq: unknown guard outcome; retrying the message", "outcome", r.Outcome, "msgId", msg.ID)
		return adapter.Retry
	}
	d := &decisions[r.Outcome]
	d.count(&c.stats).Add(1)
	c.obs.count(ctx, r.Outcome)
	if d.msg != "" && c.logger.Enabled(ctx, d.level) {
		c.logger.Log(ctx, d.level, d.msg, "group", c.group, "key", key, "msgId", msg.ID, "topic", msg.Topic, "err", r.Err, "fix", d.fix)
	}
	return d.act
}

// retryErr is the error a retried message contributes to its callback's
// answer.
func retryErr(msg *Message, r dedupe.Result) error {
	if r.Err != nil {
		return fmt.Errorf("message %s: %v: %w", msg.ID, r.Outcome, r.Err)
	}
	if r.Outcome == dedupe.Busy {
		return fmt.Errorf("message %s: key held by another consumer for %v more", msg.ID, r.Wait)
	}
	return fmt.Errorf("message %s: %v", msg.ID, r.Outcome)
}

// lateFailure counts and logs a message the guard answered Completed
// before recording it (see [dedupe.GuardConfig.LateFailure]), whose
// record then failed: it counts as r.Outcome, LeaseLost or Unrecorded,
// instead of Completed, and is logged as such, without its message, which
// was acknowledged already.
func (c *Consumer) lateFailure(ref dedupe.Ref, r dedupe.Result) {
	ctx := context.Background()
	d := &decisions[r.Outcome]
	c.stats.Completed.Add(-1)
	d.count(&c.stats).Add(1)
	c.obs.count(ctx, r.Outcome)
	if d.msg != "" && c.logger.Enabled(ctx, d.level) {
		c.logger.Log(ctx, d.level, d.msg, "group", c.group, "key", ref.Key, "err", r.Err, "fix", d.fix)
	}
}
