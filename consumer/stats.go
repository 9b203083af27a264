package consumer

import "sync/atomic"

// Stats counts what a [Consumer] did, message by message: the zero-dependency
// view of what its OpenTelemetry metrics report. Fields are safe to read at
// any time. Every delivered message ends in one of Completed, Suppressed,
// Failed, Busy, Reused, StoreDown, InvalidKey, LeaseLost, Unrecorded,
// Unguarded and Canceled, once per delivery.
type Stats struct {
	// Delivered counts every message the broker handed over.
	Delivered atomic.Int64
	// Completed counts handler runs that succeeded and were recorded.
	Completed atomic.Int64
	// Suppressed counts duplicates acknowledged without running the handler.
	Suppressed atomic.Int64
	// Failed counts handler errors and panics; their claims were released
	// for a retry.
	Failed atomic.Int64
	// Busy counts deliveries handed back for a redelivery because another
	// consumer still held the key after the busy wait (see [WithBusyWait]).
	Busy atomic.Int64
	// Waited counts messages that waited in process for a key another
	// consumer held (once per delivery).
	Waited atomic.Int64
	// Reused counts deliveries not run, and retried, because their key was
	// recorded with a different payload fingerprint.
	Reused atomic.Int64
	// StoreDown counts deliveries retried because the store failed and
	// kept failing while they waited (see [WithStoreDownWait]).
	StoreDown atomic.Int64
	// StoreWaited counts messages that waited in process for the store to
	// answer again (once per delivery); most then run or are suppressed in
	// the same delivery.
	StoreWaited atomic.Int64
	// Outages counts the times the store stopped answering claims, from the
	// first failed claim until the store answers again.
	Outages atomic.Int64
	// InvalidKey counts messages retried for lack of a usable key: none,
	// or one that fails validation.
	InvalidKey atomic.Int64
	// NoKey counts, among InvalidKey, messages that carried no key at all.
	NoKey atomic.Int64
	// LeaseLost counts successes whose lease had been taken over: their
	// effect may have run twice.
	LeaseLost atomic.Int64
	// Unrecorded counts successes the store failed to record.
	Unrecorded atomic.Int64
	// Unguarded counts successful handler runs without dedupe (fail-open).
	Unguarded atomic.Int64
	// Retried counts messages handed back for a redelivery, for any of the
	// outcomes the decision table retries (during a drain: left to the
	// queue's next owner). Each comes back, unless it reached the
	// dead-letter queue.
	Retried atomic.Int64
	// Canceled counts messages not run because a drain held them for the
	// queue's next owner, or because their callback's context ended (then
	// they are retried).
	Canceled atomic.Int64
}
