package consumer

import "sync/atomic"

// Stats counts what [Dedupe], [DedupeBatch] or [DedupeTx] did. Fields are
// safe to read at any time.
type Stats struct {
	// Delivered counts every message the broker handed over.
	Delivered atomic.Int64
	// Completed counts handler runs that succeeded: recorded, or unguarded
	// (see Unguarded).
	Completed atomic.Int64
	// Suppressed counts duplicates acknowledged without running the handler.
	Suppressed atomic.Int64
	// Failed counts handler errors and panics; their claims were released
	// for a retry.
	Failed atomic.Int64
	// InFlight counts deliveries deferred because another consumer held the key.
	InFlight atomic.Int64
	// Conflicts counts deliveries not run, and deferred, because their key
	// was recorded with a different payload fingerprint.
	Conflicts atomic.Int64
	// StoreErrors counts deliveries deferred because the store failed.
	StoreErrors atomic.Int64
	// NoKey counts messages deferred for lack of a usable key: none, or one
	// that fails validation.
	NoKey atomic.Int64
	// LeaseLost counts successes whose lease had been taken over: their
	// effect may have run twice.
	LeaseLost atomic.Int64
	// Unrecorded counts successes the store failed to record.
	Unrecorded atomic.Int64
	// Unguarded counts handler runs without dedupe (fail-open).
	Unguarded atomic.Int64
}
