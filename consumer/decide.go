package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/dedupe"
)

// action is what the consumer does with a message once the guard has
// answered.
type action uint8

const (
	// ack acknowledges the message.
	ack action = iota + 1
	// retry has the message redelivered: ConsumeRetryLater, or a suspended
	// queue for an orderly consumer.
	retry
	// hold neither acknowledges the message nor sends it back: the callback
	// returns once the client has shut down and no longer acts on its
	// answer, so the queue's next owner gets the message, without it
	// spending a reconsume.
	hold
)

// decision is one row of the table: the action for an outcome, the
// counter it increments and, for outcomes someone must hear about, the log
// record.
type decision struct {
	act   action
	count func(*Stats) *atomic.Int64
	level slog.Level
	msg   string // empty: not logged
	fix   string
	// failed gives the message's span an error status: it was not
	// processed and is retried for a reason other than a busy key, or its
	// effect may have been applied twice or not recorded.
	failed bool
}

// decisions is the consumer's one decision table, indexed by outcome.
var decisions = [...]decision{
	dedupe.Completed:  {act: ack, count: func(s *Stats) *atomic.Int64 { return &s.Completed }},
	dedupe.Suppressed: {act: ack, count: func(s *Stats) *atomic.Int64 { return &s.Suppressed }},
	// The handler's own error: the caller logs it if it wants.
	dedupe.Failed: {act: retry, failed: true, count: func(s *Stats) *atomic.Int64 { return &s.Failed }},
	// Reached only once waiting in process stopped (see awaitBusy).
	dedupe.Busy: {act: retry, count: func(s *Stats) *atomic.Int64 { return &s.Busy }},
	dedupe.Reused: {act: retry, failed: true, count: func(s *Stats) *atomic.Int64 { return &s.Reused },
		level: slog.LevelError, msg: "idemq: key reused for a different payload; not running the message, retrying it until the broker dead-letters it",
		fix: "give each payload its own key, or consumer.WithoutFingerprint() if one message's body changes between sends"},
	dedupe.StoreDown: {act: retry, failed: true, count: func(s *Stats) *atomic.Int64 { return &s.StoreDown },
		level: slog.LevelWarn, msg: "idemq: dedupe store failed; retrying the message",
		fix: "check that the store is reachable; nothing was run or lost"},
	dedupe.InvalidKey: {act: retry, failed: true, count: func(s *Stats) *atomic.Int64 { return &s.InvalidKey },
		level: slog.LevelError, msg: "idemq: message key cannot be deduplicated; retrying it until the broker dead-letters it",
		fix: "stamp messages with package producer, or configure consumer.WithKeyFallback"},
	// The effect ran and a retry cannot undo it: acknowledge, and make it
	// loud.
	dedupe.LeaseLost: {act: ack, failed: true, count: func(s *Stats) *atomic.Int64 { return &s.LeaseLost },
		level: slog.LevelError, msg: "idemq: lease lost while the handler ran; its effect may have been applied twice",
		fix: "lengthen dedupe.GuardConfig.Lease or make the handler faster; check the store's latency"},
	// A retry would run the effect again once the lease expires.
	dedupe.Unrecorded: {act: ack, failed: true, count: func(s *Stats) *atomic.Int64 { return &s.Unrecorded },
		level: slog.LevelError, msg: "idemq: handler succeeded but the store did not record it; a redelivery after the lease may run it again",
		fix: "check that the store is reachable"},
	dedupe.Unguarded: {act: ack, count: func(s *Stats) *atomic.Int64 { return &s.Unguarded },
		level: slog.LevelWarn, msg: "idemq: dedupe store failed; ran the handler without dedupe (fail-open)",
		fix: "check that the store is reachable"},
	dedupe.Canceled: {act: hold, count: func(s *Stats) *atomic.Int64 { return &s.Canceled }},
}

// decide counts, logs and returns the action for msg, whose guard answered
// r.
func (c *Consumer) decide(ctx context.Context, msg *primitive.MessageExt, r dedupe.Result) action {
	if int(r.Outcome) >= len(decisions) || decisions[r.Outcome].act == 0 {
		// Unreachable while the table covers every outcome (a test checks
		// it); retrying loses nothing.
		c.logger.ErrorContext(ctx, "idemq: unknown guard outcome; retrying the message", "outcome", r.Outcome, "msgId", msg.MsgId)
		return retry
	}
	d := &decisions[r.Outcome]
	d.count(c.stats).Add(1)
	c.obs.count(ctx, r.Outcome)
	if d.msg != "" && c.logger.Enabled(ctx, d.level) {
		c.logger.Log(ctx, d.level, d.msg, "group", c.group, "key", c.keyForLog(msg), "msgId", msg.MsgId, "topic", msg.Topic, "err", r.Err, "fix", d.fix)
	}
	return d.act
}

// keyForLog is msg's key as the consumer read it, or "" when it has none.
func (c *Consumer) keyForLog(msg *primitive.MessageExt) string {
	k, _ := c.keyOf(msg)
	return k
}

// errDraining is the answer for messages held during a drain.
var errDraining = errors.New("consumer: draining; message left for the queue's next owner")

// retryErr is the error a retried message contributes to its callback's
// answer.
func retryErr(msg *primitive.MessageExt, r dedupe.Result) error {
	if r.Err != nil {
		return fmt.Errorf("message %s: %v: %w", msg.MsgId, r.Outcome, r.Err)
	}
	if r.Outcome == dedupe.Busy {
		return fmt.Errorf("message %s: key held by another consumer for %v more", msg.MsgId, r.Wait)
	}
	return fmt.Errorf("message %s: %v", msg.MsgId, r.Outcome)
}
