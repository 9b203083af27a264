// Package dedupe is the backend-neutral idempotency core of idemq: the
// [Store] contract every dedupe backend implements, its sentinel errors, and
// a [Guard] that runs a handler at most once per key on top of any Store.
//
// [NewGuard] takes its store and a [GuardConfig] whose zero value works, each
// field stating its default; the Store wrappers [WithGroupCommit] and
// [WithDoneCache] take what they need as parameters, and nothing here takes
// functional options.
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
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"time"
	"unicode/utf8"

	"github.com/idemq/idemq/msgkey"
)

// Errors returned by stores. Backends wrap them; test with errors.Is.
var (
	// ErrInvalidKey reports a Ref whose namespace, group or key is empty
	// (group and key only), too long, not valid UTF-8 or holds control
	// characters. Nothing is stored for it. It is [msgkey.ErrInvalid], the
	// one error for a key that cannot be carried or stored.
	ErrInvalidKey = msgkey.ErrInvalid
	// ErrLeaseLost reports a Complete, Release or Extend whose token no longer
	// owns a live lease: the lease ended by the store's clock (whether or not
	// the key was claimed again since), or the record was released, reclaimed
	// or completed by another owner.
	ErrLeaseLost = errors.New("dedupe: lease lost")
	// ErrConflict reports a key that is already recorded with a different
	// payload fingerprint of the same kind (see [ClaimRequest.Fingerprint]).
	ErrConflict = errors.New("dedupe: key reused with a different payload")
	// ErrInFlight reports a key held by another owner's live lease, or, for
	// a claim inside a transaction ([TxClaimer]), by another transaction
	// that did not end within the store's lock timeout.
	ErrInFlight = errors.New("dedupe: key in flight")
)

// GiveBackTimeout bounds how long a store spends giving back the claims of
// a call that failed with its outcome unknown (its context ended, or the
// connection dropped, after the database or Redis may have taken the keys),
// on a context detached from the caller's, so that the keys are free at
// once instead of held for a lease.
const GiveBackTimeout = 5 * time.Second

// Limits on the parts of a Ref other than the key (whose limit is
// [msgkey.MaxLen]), in bytes. They keep store keys and SQL index entries
// bounded (255 bytes of utf8mb4 fit a MySQL index).
const (
	MaxNamespaceLen = 64
	MaxGroupLen     = 255
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
	return checkPart("key", r.Key, msgkey.MaxLen, false)
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
	}
	// Every message's key is checked on the hot path, and most are
	// printable ASCII: one comparison a byte tells.
	printable := true
	for i := 0; i < len(s) && printable; i++ {
		printable = s[i]-0x20 < 0x7f-0x20
	}
	if printable {
		return nil
	}
	// Invalid UTF-8 is reported before a control character, wherever
	// each is.
	control := rune(-1)
	for i := 0; i < len(s); {
		c, size := rune(s[i]), 1
		if c >= utf8.RuneSelf {
			if c, size = utf8.DecodeRuneInString(s[i:]); c == utf8.RuneError && size == 1 {
				return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidKey, what)
			}
		}
		if control < 0 && (c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0)) {
			control = c
		}
		i += size
	}
	if control >= 0 {
		return fmt.Errorf("%w: %s holds control character %U", ErrInvalidKey, what, control)
	}
	return nil
}

// Fingerprint returns a ClaimRequest fingerprint for payload: 16 lowercase
// hex digits, the CRC-32C of its bytes then their CRC-32 (IEEE), the same
// in every process and version.
//
// It tells a key reused by accident for another payload from a redelivery,
// and is no security check: anyone can make two payloads that share one.
// Two CRCs rather than one 64-bit hash because amd64 and arm64 compute them
// in hardware, several times as fast as FNV-1a or a CRC-64 (ten times for
// 4 KiB), so the check stays cheap for large bodies; together they miss no
// change of up to 64 consecutive bits and a random change once in 2^64.
//
// Earlier versions recorded the 64-digit hex SHA-256 of the payload instead:
// of another length, so of another kind, their records are not compared with
// this one's (see [ClaimRequest.Fingerprint]).
func Fingerprint(payload []byte) string {
	var sum [8]byte
	binary.BigEndian.PutUint32(sum[:4], crc32.Checksum(payload, castagnoli))
	binary.BigEndian.PutUint32(sum[4:], crc32.ChecksumIEEE(payload))
	var buf [16]byte
	hex.Encode(buf[:], sum[:])
	return string(buf[:])
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// FingerprintsConflict reports whether a claim with the fingerprint
// requested answers Conflict to a live record holding recorded: the two are
// of one kind (the same length in bytes) and differ. It is the rule of
// [ClaimRequest.Fingerprint], which every [Store] applies.
func FingerprintsConflict(recorded, requested string) bool {
	return len(recorded) == len(requested) && recorded != requested
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
	// Conflict: the key is recorded with a different payload fingerprint
	// of the same kind (see [ClaimRequest.Fingerprint]).
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
	// Fingerprint optionally identifies the payload (a printable hash such as
	// [Fingerprint] returns, at most MaxFingerprint bytes, valid UTF-8 without
	// control characters). A claim that meets a live record answers Conflict
	// when the record's fingerprint and this one have the same length in
	// bytes and differ ([FingerprintsConflict]). The length is the
	// fingerprint's kind: fingerprints of different lengths are not
	// compared, and an empty one, on either side, disables the check alike;
	// such a claim answers Done or InFlight. This is so that a rolling
	// upgrade from one kind to another (from the 64-digit SHA-256 that
	// earlier versions recorded to [Fingerprint]'s 16 digits) does not
	// report every key done or in flight across it as reused; the price is
	// that a key reused across kinds goes unnoticed.
	Fingerprint string
}

// Validate reports whether r is a well-formed request.
func (r ClaimRequest) Validate() error {
	if err := r.Ref.Validate(); err != nil {
		return err
	}
	if r.Lease <= 0 {
		return fmt.Errorf("dedupe: lease %v must be positive", r.Lease)
	}
	return checkPart("fingerprint", r.Fingerprint, MaxFingerprint, true)
}

// ClaimResult is the answer to one ClaimRequest.
type ClaimResult struct {
	Status Status
	// Token identifies the owner when Status is Acquired; it is needed to
	// complete, release or extend the claim.
	Token string
	// Until is, by the store's clock, when the current owner's lease ends
	// (Status InFlight) or when the done record's retention ends (Status
	// Done). It is zero for the other statuses.
	Until time.Time
	// Remaining is Until minus the store's now: for InFlight how long to wait
	// before retrying, for Done how long the key stays done; free of clock
	// skew between hosts. It is positive exactly when Until is set.
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
// an error wrapping ctx.Err(), and a call whose context is done before it
// starts changes nothing. Any error other than the documented sentinels
// means the store could not be reached or answered wrongly; the outcome of
// such a write is unknown: the caller must not count on it having been
// applied, nor on it not having been (a retry with the same token is safe).
//
// Keys are data, never syntax: a Ref that passes [Ref.Validate] is stored
// and compared byte for byte (a key "a*" never matches "ab"), whatever quotes,
// wildcards or braces it holds; one that fails it is rejected with
// [ErrInvalidKey] before the store is asked.
//
// Package [github.com/idemq/idemq/dedupe/dedupetest] holds the conformance
// suite every implementation runs.
type Store interface {
	// Claim takes the key for req.Lease, answering Acquired with a fresh
	// token, if no record exists, its retention has ended or its lease has
	// ended (an expired lease counts as no record at all). Otherwise, if the
	// live record's fingerprint and req's have the same length and differ
	// ([FingerprintsConflict]), it answers Conflict; else Done for a
	// completed key and InFlight for a key held by a live lease. Fingerprints
	// of different lengths, like an empty one, are never compared, so that a
	// rolling upgrade between fingerprint kinds does not report every key
	// in flight across it as reused (see [ClaimRequest.Fingerprint]). It
	// fails with ErrInvalidKey for a bad request.
	Claim(ctx context.Context, req ClaimRequest) (ClaimResult, error)
	// Complete marks an owned key done and keeps it for retention (which must
	// be positive) from the store's now. A token whose lease has ended or
	// that does not own the record fails with ErrLeaseLost and changes
	// nothing. Completing again with the token that completed the record
	// succeeds and restarts the retention, so a Complete whose answer was
	// lost can be retried.
	Complete(ctx context.Context, t Ticket, retention time.Duration) error
	// Release deletes an owned, still processing record so that the key can
	// be claimed again at once. A token whose lease has ended or that does
	// not own a processing record fails with ErrLeaseLost and changes
	// nothing.
	Release(ctx context.Context, t Ticket) error
	// Extend moves an owned lease's end to the store's now plus lease (which
	// must be positive), shortening it if lease is shorter than what is
	// left. A token whose lease has ended or that does not own a processing
	// record fails with ErrLeaseLost.
	Extend(ctx context.Context, t Ticket, lease time.Duration) error
}

// Batcher is implemented by stores that claim, complete and release many keys
// in one round trip. Results and per-item errors are in request order, and
// the answers are those of the single calls made one after another in that
// order (a key twice in one ClaimBatch is Acquired, then InFlight). A non-nil
// error return means the whole batch failed with an unknown outcome. Per-item
// errors are ErrInvalidKey or ErrLeaseLost as in [Store].
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
			releaseAcquired(ctx, s, reqs[:i], res[:i])
			return nil, nil, err
		}
		errs[i] = err
	}
	return res, errs, nil
}

// releaseAcquired gives back, as far as the store lets it, the claims a
// failed batch had taken: the caller never learns their tokens, and they
// would hold their keys for a whole lease. Each release has its own
// GiveBackTimeout: one bound shared by a batch of a hundred ran out on a
// loaded machine before the last releases were sent.
func releaseAcquired(ctx context.Context, s Store, reqs []ClaimRequest, res []ClaimResult) {
	ctx = context.WithoutCancel(ctx)
	for i, r := range res {
		if r.Status == Acquired {
			rctx, cancel := context.WithTimeout(ctx, GiveBackTimeout)
			_ = s.Release(rctx, Ticket{Ref: reqs[i].Ref, Token: r.Token})
			cancel()
		}
	}
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
