package consumer

import "sync/atomic"

// Stats is a snapshot of what a [Consumer] did, message by message, since
// [New] ([Consumer.Stats]): the zero-dependency view of what its
// OpenTelemetry metrics report. Every delivered message ends in one of Completed, Suppressed,
// Failed, Busy, Reused, StoreDown, InvalidKey, LeaseLost, Unrecorded,
// Unguarded and Canceled, once per delivery.
type Stats struct {
	// Delivered counts every message the broker handed over.
	Delivered int64
	// Completed counts handler runs that succeeded and were recorded.
	Completed int64
	// Suppressed counts duplicates acknowledged without running the handler.
	Suppressed int64
	// Failed counts handler errors and panics; their claims were released
	// for a retry.
	Failed int64
	// Busy counts deliveries handed back for a redelivery because another
	// consumer still held the key after the busy wait (see [WithBusyWait]).
	Busy int64
	// Waited counts messages that waited in process for a key another
	// consumer held (once per delivery).
	Waited int64
	// Reused counts deliveries not run, and retried, because their key was
	// recorded with a different payload fingerprint.
	Reused int64
	// StoreDown counts deliveries retried because the store failed and
	// kept failing while they waited (see [WithStoreDownWait]).
	StoreDown int64
	// StoreWaited counts messages that waited in process for the store to
	// answer again (once per delivery); most then run or are suppressed in
	// the same delivery.
	StoreWaited int64
	// Outages counts the times the store stopped answering claims, from the
	// first failed claim until the store answers again.
	Outages int64
	// InvalidKey counts messages retried for lack of a usable key: none,
	// or one that fails validation.
	InvalidKey int64
	// NoKey counts, among InvalidKey, messages that carried no key at all.
	NoKey int64
	// LeaseLost counts successes whose lease had been taken over: their
	// effect may have run twice.
	LeaseLost int64
	// Unrecorded counts successes the store failed to record.
	Unrecorded int64
	// Unguarded counts successful handler runs without dedupe (fail-open).
	Unguarded int64
	// Retried counts messages handed back for a redelivery, for any of the
	// outcomes the decision table retries (during a drain: left to the
	// queue's next owner). Each comes back, unless it reached the
	// dead-letter queue.
	Retried int64
	// Canceled counts messages not run because a drain held them for the
	// queue's next owner, or because their callback's context ended (then
	// they are retried).
	Canceled int64
}

// counters are a Consumer's running counts, one per field of [Stats]
// (see its doc), updated where the decision table decides.
type counters struct {
	Delivered   atomic.Int64
	Completed   atomic.Int64
	Suppressed  atomic.Int64
	Failed      atomic.Int64
	Busy        atomic.Int64
	Waited      atomic.Int64
	Reused      atomic.Int64
	StoreDown   atomic.Int64
	StoreWaited atomic.Int64
	Outages     atomic.Int64
	InvalidKey  atomic.Int64
	NoKey       atomic.Int64
	LeaseLost   atomic.Int64
	Unrecorded  atomic.Int64
	Unguarded   atomic.Int64
	Retried     atomic.Int64
	Canceled    atomic.Int64
}

// Stats returns a snapshot of the Consumer's counts: each is read
// atomically, the set not at one instant.
func (c *Consumer) Stats() Stats {
	s := &c.stats
	return Stats{
		Delivered:   s.Delivered.Load(),
		Completed:   s.Completed.Load(),
		Suppressed:  s.Suppressed.Load(),
		Failed:      s.Failed.Load(),
		Busy:        s.Busy.Load(),
		Waited:      s.Waited.Load(),
		Reused:      s.Reused.Load(),
		StoreDown:   s.StoreDown.Load(),
		StoreWaited: s.StoreWaited.Load(),
		Outages:     s.Outages.Load(),
		InvalidKey:  s.InvalidKey.Load(),
		NoKey:       s.NoKey.Load(),
		LeaseLost:   s.LeaseLost.Load(),
		Unrecorded:  s.Unrecorded.Load(),
		Unguarded:   s.Unguarded.Load(),
		Retried:     s.Retried.Load(),
		Canceled:    s.Canceled.Load(),
	}
}
