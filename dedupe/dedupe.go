// Package dedupe is the backend-neutral idempotency core of idemq: the
// [Store] contract every dedupe backend implements, its sentinel errors, and
// a [Guard] that runs a handler at most once per key on top of any Store.
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
package dedupe

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Errors returned by stores and the guard. Backends wrap them; test with
// errors.Is.
var (
	// ErrInvalidKey reports a Ref whose namespace, group or key is empty
	// (group and key only), too long, not valid UTF-8 or holds control
	// characters. Nothing is stored for it.
	ErrInvalidKey = errors.New("dedupe: invalid key")
	// ErrLeaseLost reports a Complete, Release or Extend whose token no longer
	// owns the record: the lease expired and the record was reclaimed, removed
	// or completed by another owner.
	ErrLeaseLost = errors.New("dedupe: lease lost")
	// ErrConflict reports a key that is already recorded with a different
	// payload fingerprint.
	ErrConflict = errors.New("dedupe: key reused with a different payload")
	// ErrInFlight reports a key held by another owner's live lease.
	ErrInFlight = errors.New("dedupe: key in flight")
	// ErrUnrecorded reports a handler that succeeded but whose completion
	// could not be stored: acknowledge the message (a redelivery would run
	// the effect again once the lease expires) and report it.
	ErrUnrecorded = errors.New("dedupe: effect applied but not recorded")
	// ErrStoreUnavailable is what a [Guard] returns when the store failed and
	// the message must be retried later (fail-closed).
	ErrStoreUnavailable = errors.New("dedupe: store unavailable")
)

// Limits on the parts of a Ref, in bytes. They keep store keys and SQL
// index entries bounded (255 bytes of utf8mb4 fit a MySQL index).
const (
	MaxNamespaceLen = 64
	MaxGroupLen     = 255
	MaxKeyLen       = 255
	MaxFingerprint  = 128
)

// Ref names one record: Key within consumer Group within Namespace.
type Ref struct {
	// Namespace separates applications that share one store. It may be empty.
	Namespace string
	// Group is the consumer group: two groups consuming one topic each
	// process every message once.
	Group string
	// Key is the message's idempotency key.
	Key string
}

// Validate reports whether r can be stored. Its error wraps [ErrInvalidKey].
func (r Ref) Validate() error {
	if err := checkPart("namespace", r.Namespace, MaxNamespaceLen, true); err != nil {
		return err
	}
	if err := checkPart("group", r.Group, MaxGroupLen, false); err != nil {
		return err
	}
	return checkPart("key", r.Key, MaxKeyLen, false)
}

func (r Ref) String() string {
	return fmt.Sprintf("%s/%s/%s", r.Namespace, r.Group, r.Key)
}

func checkPart(what, s string, max int, emptyOK bool) error {
	switch {
	case s == "" && !emptyOK:
		return fmt.Errorf("%w: empty %s", ErrInvalidKey, what)
	case len(s) > max:
		return fmt.Errorf("%w: %s is %d bytes, limit %d", ErrInvalidKey, what, len(s), max)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidKey, what)
	}
	for _, c := range s {
		if c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) {
			return fmt.Errorf("%w: %s holds control character %U", ErrInvalidKey, what, c)
		}
	}
	return nil
}

// Status is a store's answer to a claim.
type Status int

// Claim outcomes.
const (
	// Acquired: nobody held the key; the caller owns it until the lease ends.
	Acquired Status = iota + 1
	// Done: the key was completed before and is within its retention.
	Done
	// InFlight: another owner holds a live lease.
	InFlight
	// Conflict: the key is recorded with a different payload fingerprint.
	Conflict
)

func (s Status) String() string {
	switch s {
	case Acquired:
		return "acquired"
	case Done:
		return "done"
	case InFlight:
		return "in-flight"
	case Conflict:
		return "conflict"
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// ClaimRequest asks to own one key for a lease.
type ClaimRequest struct {
	Ref
	// Lease is how long the claim holds before another caller may take the
	// key over. It must be positive.
	Lease time.Duration
	// Fingerprint optionally identifies the payload (a hash, at most
	// MaxFingerprint bytes). When both the record and the request carry one
	// and they differ, the claim answers Conflict. Empty disables the check.
	Fingerprint string
}

// Validate reports whether r is a well-formed request.
func (r ClaimRequest) Validate() error {
	if err := r.Ref.Validate(); err != nil {
		return err
	}
	if r.Lease <= 0 {
		return fmt.Errorf("dedupe: claim %s: lease %v must be positive", r.Ref, r.Lease)
	}
	if len(r.Fingerprint) > MaxFingerprint {
		return fmt.Errorf("%w: fingerprint is %d bytes, limit %d", ErrInvalidKey, len(r.Fingerprint), MaxFingerprint)
	}
	return nil
}

// ClaimResult is the answer to one ClaimRequest.
type ClaimResult struct {
	Status Status
	// Token identifies the owner when Status is Acquired; it is needed to
	// complete, release or extend the claim.
	Token string
	// Until is when the current owner's lease ends, by the store's clock,
	// when Status is InFlight.
	Until time.Time
	// Remaining is Until minus the store's now when Status is InFlight: how
	// long to wait before retrying, free of clock skew between hosts.
	Remaining time.Duration
}

// Ticket is an owned claim: the Ref and the owner token Claim returned.
type Ticket struct {
	Ref
	Token string
}

// Store records claims. Implementations are safe for concurrent use by
// multiple goroutines and processes.
//
// Every method honours ctx: a cancelled or expired context ends the call with
// an error wrapping ctx.Err(). Any error other than the documented sentinels
// means the store could not be reached or answered wrongly; the outcome of
// such a write is unknown, and callers must treat it as not applied.
type Store interface {
	// Claim takes the key for req.Lease if it is free, or if its previous
	// owner's lease has expired. It answers Done for a completed key within
	// retention, InFlight for a key held by a live lease, Conflict for a
	// fingerprint mismatch. It fails with ErrInvalidKey for a bad request.
	Claim(ctx context.Context, req ClaimRequest) (ClaimResult, error)
	// Complete marks an owned key done and keeps it for retention (which must
	// be positive). A token that no longer owns the record fails with
	// ErrLeaseLost and changes nothing.
	Complete(ctx context.Context, t Ticket, retention time.Duration) error
	// Release deletes an owned, still processing record so that the key can
	// be claimed again at once. A token that no longer owns it fails with
	// ErrLeaseLost and changes nothing.
	Release(ctx context.Context, t Ticket) error
	// Extend moves an owned lease's end to the store's now plus lease. A
	// token that no longer owns it fails with ErrLeaseLost.
	Extend(ctx context.Context, t Ticket, lease time.Duration) error
}

// Batcher is implemented by stores that claim, complete and release many keys
// in one round trip. Results and per-item errors are in request order; a
// non-nil error return means the whole batch failed with an unknown outcome.
// Per-item errors are ErrInvalidKey or ErrLeaseLost as in [Store].
type Batcher interface {
	ClaimBatch(ctx context.Context, reqs []ClaimRequest) ([]ClaimResult, []error, error)
	CompleteBatch(ctx context.Context, ts []Ticket, retention time.Duration) ([]error, error)
	ReleaseBatch(ctx context.Context, ts []Ticket) ([]error, error)
}

// ClaimBatch claims reqs with one round trip when s is a [Batcher] and one
// call per request otherwise.
func ClaimBatch(ctx context.Context, s Store, reqs []ClaimRequest) ([]ClaimResult, []error, error) {
	if b, ok := s.(Batcher); ok {
		return b.ClaimBatch(ctx, reqs)
	}
	res := make([]ClaimResult, len(reqs))
	errs := make([]error, len(reqs))
	for i, r := range reqs {
		var err error
		res[i], err = s.Claim(ctx, r)
		if err != nil && !errors.Is(err, ErrInvalidKey) {
			return nil, nil, err
		}
		errs[i] = err
	}
	return res, errs, nil
}

// CompleteBatch completes ts with one round trip when s is a [Batcher].
func CompleteBatch(ctx context.Context, s Store, ts []Ticket, retention time.Duration) ([]error, error) {
	if b, ok := s.(Batcher); ok {
		return b.CompleteBatch(ctx, ts, retention)
	}
	return each(ts, func(t Ticket) error { return s.Complete(ctx, t, retention) })
}

// ReleaseBatch releases ts with one round trip when s is a [Batcher].
func ReleaseBatch(ctx context.Context, s Store, ts []Ticket) ([]error, error) {
	if b, ok := s.(Batcher); ok {
		return b.ReleaseBatch(ctx, ts)
	}
	return each(ts, func(t Ticket) error { return s.Release(ctx, t) })
}

func each(ts []Ticket, f func(Ticket) error) ([]error, error) {
	errs := make([]error, len(ts))
	for i, t := range ts {
		err := f(t)
		if err != nil && !errors.Is(err, ErrInvalidKey) && !errors.Is(err, ErrLeaseLost) {
			return nil, err
		}
		errs[i] = err
	}
	return errs, nil
}
