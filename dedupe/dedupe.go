// Package dedupe is the backend-neutral idempotency core of idemq: the
// [Store] contract every dedupe backend implements, its sentinel errors, and
// a [Guard] that runs a handler at most once per key on top of any Store.
//
// [NewGuard] takes its store and a [GuardConfig] whose zero value works, each
// field stating its default; nothing here takes functional options.
//
// # Records
//
// A store keeps one record per [Ref] — (namespace, consumer group, key). A
// record is either processing (held by the owner of a lease, identified by a
// random token) or done (kept for a retention period so that duplicates can be
// recognised). Every expiry — lease deadlines and retention — is decided by the
// store's own clock, never the caller's, so consumers with skewed clocks agree.
//
// # Delivery semantics
//
// A message is claimed before its handler runs, completed after the handler
// succeeds and released when it fails. A duplicate of a done message is
// suppressed; a duplicate of a message in flight is retried later; a failed
// message can be claimed again at once, so nothing is lost. If a lease runs out
// while its handler still runs, another consumer may claim the key: the first
// owner's Complete then fails with [ErrLeaseLost], the one case in which a side
// effect may have run twice; it is reported, never hidden.
//
// # Transactions
//
// A handler whose effects are writes to the SQL database that holds the
// records can have them applied exactly once, at one commit per message: a
// [Guard] in the transactional mode ([GuardConfig.Tx]) claims the key as
// the first statement of the handler's own transaction, on a [TxClaimer]
// store, and the commit records the key done with the handler's writes. The claimed row's lock is the lease: a
// duplicate waits for the transaction's outcome (done, or free again), and
// a consumer that dies mid-handler leaves nothing behind, for its
// transaction rolls back with its connection.
package dedupe

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors returned by stores, besides [msgkey.ErrInvalid] for a [Ref] that
// cannot be stored: the one error for a key that cannot be carried or
// stored. Backends wrap them; test with errors.Is.
var (
	// ErrLeaseLost reports a Complete, Release or Extend whose token no longer
	// owns a live lease: the lease ended by the store's clock (whether or not
	// the key was claimed again since), or the record was released, reclaimed
	// or completed by another owner.
	ErrLeaseLost = errors.New("dedupe: lease lost")
	// ErrBusy reports, for a claim inside a transaction ([TxClaimer]), a key
	// or a database held by another transaction that did not end within the
	// store's lock timeout: the [Busy] outcome of a call that could not
	// answer with a [ClaimResult].
	ErrBusy = errors.New("dedupe: key busy")
)

// Ref names one record: Key within consumer Group within Namespace. A Ref
// is stored when its namespace is at most 64 bytes (it may be empty), its
// group at most 255 and its key at most [msgkey.MaxLen], all valid UTF-8
// without control characters; any other fails with [msgkey.ErrInvalid].
type Ref struct {
	// Namespace separates applications that share one store. It may be empty.
	Namespace string
	// Group is the consumer group: two groups consuming one topic each
	// process every message once.
	Group string
	// Key is the message's idempotency key.
	Key string
}

func (r Ref) String() string {
	return fmt.Sprintf("%s/%s/%s", r.Namespace, r.Group, r.Key)
}

// Item is one message: its key, and its payload's fingerprint. [Guard.Do]
// runs items, and [Store.Claim] claims them.
type Item struct {
	Ref
	// Fingerprint optionally identifies the payload (a printable hash, at
	// most 128 bytes, valid UTF-8 without control characters; a consumer
	// records 16 hex digits of two CRC-32s of the body). A claim that meets
	// a live record answers [Reused] when the record's fingerprint and this
	// one have the same length in bytes and differ. The length is the
	// fingerprint's kind: fingerprints of different lengths are not
	// compared, and an empty one, on either side, disables the check alike;
	// such a claim answers [Suppressed] or [Busy]. This is so that a rolling
	// upgrade from one kind to another (from the 64-digit SHA-256 that
	// earlier versions recorded to today's 16 digits) does not report every
	// key done or in flight across it as reused; the price is that a key
	// reused across kinds goes unnoticed.
	Fingerprint string
	// Trace optionally names the run that handles the item, as a W3C
	// traceparent (a consumer puts its message span's there when it
	// traces): a [Guard] hands it to Complete in the item's [Ticket] when
	// the handler succeeds, so that a later duplicate's claim can say
	// which run applied the effect. Claim does not read it, and it takes
	// no part in telling an item from another.
	Trace string
}

// ClaimResult is a store's answer to the claim of one Item.
type ClaimResult struct {
	// Outcome is [Acquired], [Suppressed] (the key is done), [Busy] (another
	// owner holds a live lease) or [Reused] (see [Item.Fingerprint]).
	Outcome Outcome
	// Token identifies the owner when Outcome is Acquired; it is needed to
	// complete, release or extend the claim.
	Token string
	// Until is, by the store's clock, when the current owner's lease ends
	// (Busy) or when the done record's retention ends (Suppressed). It is
	// zero for the other outcomes.
	Until time.Time
	// Remaining is Until minus the store's now: for Busy how long to wait
	// before retrying, for Suppressed how long the key stays done; free of
	// clock skew between hosts. It is positive exactly when Until is set.
	Remaining time.Duration
	// Trace is, for Suppressed, the [Ticket.Trace] the completion kept,
	// from a store that keeps it (see [Ticket.Trace]); empty otherwise.
	Trace string
}

// Ticket is an owned claim: the Ref and the owner token Claim returned.
type Ticket struct {
	Ref
	Token string
	// Trace is the [Item.Trace] of the run that completes the claim. A
	// store that can (memdedupe, redisdedupe; not sqldedupe, whose table
	// has no column for it) keeps it in the done record, when it is at
	// most 128 bytes of printable ASCII without spaces, and answers it in
	// a Suppressed claim's [ClaimResult.Trace]; one that cannot, or a
	// Trace that is not such, keeps nothing and completes all the same.
	// Release and Extend ignore it.
	Trace string
}

// Store records claims. Implementations are safe for concurrent use by
// multiple goroutines and processes.
//
// Claim, Complete and Release take many keys, for one round trip: a single
// message is a batch of one. Results and per-item errors are in the order
// of the items or tickets, and the answers are those of calls of one key
// made one after another in that order (a key twice in one Claim is
// Acquired, then Busy). Per-item errors are [msgkey.ErrInvalid], or
// [ErrLeaseLost] for Complete and Release; a non-nil error return means the
// whole call failed with an unknown outcome, except that a failed Claim
// leaves no key taken, for its caller never learns the tokens. The caller
// reads the slices a call returns and never writes them, so that a store
// may answer every call in which no item failed with one shared slice of
// nil errors; the store neither writes nor keeps the slices it is given
// once the call has returned.
//
// Every method honours ctx: a cancelled or expired context ends the call with
// an error wrapping ctx.Err(), and a call whose context is done before it
// starts changes nothing. Any error other than the documented sentinels
// means the store could not be reached or answered wrongly; the outcome of
// such a write is unknown: the caller must not count on it having been
// applied, nor on it not having been (a retry with the same token is safe).
//
// Keys are data, never syntax: a valid [Ref] is stored and compared byte
// for byte (a key "a*" never matches "ab"), whatever quotes, wildcards or
// braces it holds; an invalid one is rejected with [msgkey.ErrInvalid] before
// the store is asked.
//
// Package [github.com/idemq/idemq/dedupe/dedupetest] holds the conformance
// suite every implementation runs.
type Store interface {
	// Claim takes each item's key for lease (which must be positive),
	// answering Acquired with a fresh token, if no record exists, its
	// retention has ended or its lease has ended (an expired lease counts
	// as no record at all). Otherwise, if the live record's fingerprint and
	// the item's have the same length and differ, it answers Reused; else
	// Suppressed for a completed key and Busy for a key held by a live
	// lease. Fingerprints of different lengths, like an empty one, are
	// never compared, so that a rolling upgrade between fingerprint kinds
	// does not report every key in flight across it as reused (see
	// [Item.Fingerprint]).
	Claim(ctx context.Context, items []Item, lease time.Duration) ([]ClaimResult, []error, error)
	// Complete marks owned keys done and keeps them for retention (which
	// must be positive) from the store's now. A token whose lease has ended
	// or that does not own the record fails with ErrLeaseLost and changes
	// nothing. Completing again with the token that completed the record
	// succeeds and restarts the retention, so a Complete whose answer was
	// lost can be retried.
	Complete(ctx context.Context, ts []Ticket, retention time.Duration) ([]error, error)
	// Release deletes owned, still processing records so that their keys
	// can be claimed again at once. A token whose lease has ended or that
	// does not own a processing record fails with ErrLeaseLost and changes
	// nothing.
	Release(ctx context.Context, ts []Ticket) ([]error, error)
	// Extend moves an owned lease's end to the store's now plus lease (which
	// must be positive), shortening it if lease is shorter than what is
	// left. A token whose lease has ended or that does not own a processing
	// record fails with ErrLeaseLost.
	Extend(ctx context.Context, t Ticket, lease time.Duration) error
}

// CompleteClaimer is a [Store] that can send completions and claims in
// one round trip: a [Guard] that defers its completions
// ([GuardConfig.LateFailure]) then sends them with its next claim, and a
// serial consumer makes one round trip per message instead of two.
type CompleteClaimer interface {
	Store
	// CompleteClaim is Complete(ctx, ts, retention) followed by Claim(ctx,
	// items, lease), applied in that order (a key completed and claimed
	// in one call is found done) and answered as those calls are: done
	// and doneErr are Complete's answer, res, errs and err Claim's.
	CompleteClaim(ctx context.Context, ts []Ticket, retention time.Duration, items []Item, lease time.Duration) (done []error, doneErr error, res []ClaimResult, errs []error, err error)
}
