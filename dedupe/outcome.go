package dedupe

import (
	"fmt"
	"time"
)

// Outcome is what a [Guard] did with one message, or a [Store]'s answer to
// one claim: a closed set, so that a caller decides what to do with the
// message (acknowledge, retry, report) in one table with a row per
// outcome. The error beside an outcome, in [Result], is detail for logs,
// never the decision. A store answers Acquired, Suppressed, Busy or
// Reused, and a Guard answers every outcome but Acquired, each state
// having one name in both.
type Outcome uint8

// Outcomes. The handler ran for Completed, Failed, LeaseLost, Unrecorded
// and Unguarded, and for no other.
const (
	// Completed: the handler succeeded and the key is recorded done.
	Completed Outcome = iota + 1
	// Failed: the handler failed or panicked (Err says how) and its claim
	// was released, so a redelivery runs at once.
	Failed
	// Suppressed: the key was done before (or an earlier item of the same
	// batch with the same key and payload succeeded); the handler did not
	// run.
	Suppressed
	// Busy: another owner holds the key by a live lease (or, in a
	// transaction, a lock); the handler did not run. Result.Wait is how long the holder's lease
	// still runs by the store's clock (zero when unknown: ask again).
	Busy
	// Reused: the key is recorded with another payload's fingerprint of
	// the same kind (see [Item.Fingerprint]); the handler did not
	// run.
	Reused
	// StoreDown: the store failed (Err says how) and nothing is known; the
	// handler did not run (fail-closed).
	StoreDown
	// InvalidKey: the key cannot be stored (Err wraps [msgkey.ErrInvalid]); the
	// handler did not run.
	InvalidKey
	// LeaseLost: the handler succeeded, but its lease had ended, so another
	// consumer may have run it too: its effect may have been applied twice.
	LeaseLost
	// Unrecorded: the handler succeeded but the store failed to record it
	// (Err says how); once its lease ends a redelivery would run it again.
	Unrecorded
	// Unguarded: the store failed and, with FailOpen, the handler ran
	// without dedupe and succeeded. (Had it failed: Failed.)
	Unguarded
	// Canceled: the caller's context ended (Err is its cause) before the
	// handler's turn came; the handler did not run.
	Canceled
	// Acquired: a store's answer only: nobody held the key, and the
	// claimer owns it until its lease ends.
	Acquired
)

var outcomeNames = [...]string{
	Completed:  "completed",
	Failed:     "failed",
	Suppressed: "suppressed",
	Busy:       "busy",
	Reused:     "reused",
	StoreDown:  "store-down",
	InvalidKey: "invalid-key",
	LeaseLost:  "lease-lost",
	Unrecorded: "unrecorded",
	Unguarded:  "unguarded",
	Canceled:   "canceled",
	Acquired:   "acquired",
}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) && outcomeNames[o] != "" {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Result is a [Guard]'s answer for one message.
type Result struct {
	Outcome Outcome
	// Err is the detail: the handler's error for Failed, the store's for
	// StoreDown, Unrecorded and Unguarded, why for InvalidKey, LeaseLost
	// and Canceled, and for a Busy item why it did not run when it was not
	// the store's answer (a lease lost before its turn, a repeat of a
	// failed item). It is nil for Completed, Suppressed and Reused, and for
	// Busy when the store answered it.
	Err error
	// Wait is, for Busy, how long the holder's lease still runs.
	Wait time.Duration
	// Trace is, for Suppressed, the [Item.Trace] of the run that applied
	// the effect, where it is known: kept by the store with the
	// completion (see [Ticket.Trace]), or that of the batch's earlier
	// item it repeats. Empty otherwise.
	Trace string
}
