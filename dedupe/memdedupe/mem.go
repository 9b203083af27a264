// Package memdedupe is an in-memory [dedupe.Store] for unit tests and the
// zero-dependency quickstart.
//
// Records live in one process and vanish with it, so it deduplicates only
// what that process sees: use redisdedupe or sqldedupe when consumers run in
// more than one process or must survive a restart.
//
// Expired records count as absent at once. Each claim also deletes the
// expired ones among the next few records in the store, so that memory
// follows the live records, and no call waits for a pass over all of them;
// the store grows and shrinks by small pieces for the same reason (see
// [Store]). A store that gets no claims keeps its expired records until
// claims come again.
//
// [New] takes a [Config] whose zero value works; each field states its
// default.
//
// # Inspecting
//
// Store is a [dedupe.Inspector] too. Get costs what a claim does; List and
// Stats read every record under the store's lock, O(records) per call,
// which is small in a test or a single process. Forget deletes a record
// whatever its state, for reprocessing after a bad deploy: the key's next
// delivery runs its handler, and the handler's side effects, again.
package memdedupe

import (
	"context"
	"crypto/rand"
	"fmt"
	"hash/maphash"
	"sync"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/dedupekit"
)

// Config holds a Store's optional settings. The zero value works.
type Config struct {
	// Now is the store's clock, which decides every lease and retention.
	// Default time.Now, read as the store's time.Now at New plus
	// time.Since then: the same monotonic reading, which decides every
	// comparison of two times that carry one, for one read of the clock
	// instead of two. Its wall reading, which is what the Until of a
	// result prints, follows the monotonic clock, not steps of the wall
	// clock since New. Tests set Now to step through leases and retention
	// without sleeping.
	Now func() time.Time
}

// Store is an in-memory dedupe store, safe for concurrent use.
//
// Every call does a bounded amount of work under the store's lock, however
// many records it holds: a claim examines 8 records for expiry, the store
// grows and shrinks by pages of 256 records, and its hash table is split in
// tables of at most 4096 cells, of which a call rehashes at most two. A
// pass over every record, or a copy of them all to grow, used to hold the
// lock for 230 ms to 630 ms at a million records, stalling every other
// call, a lease holder's extension among them.
//
// A token is the store's tag, drawn from crypto/rand when the store is
// made, then the record's slot and the number of the claim that made it,
// counted per store. Claim numbers never repeat within a store, so a stale
// token never matches a later claim's record, whatever slot it took;
// another Store's tokens carry another tag (two tags agree once in 2^96),
// so they match none of this one's records either. Tokens need no secrecy
// here: a caller who could guess one shares the process, and with it the
// Store. One random draw per store instead of one per claim keeps a claim
// to a counter and a short string.
type Store struct {
	now  func() time.Time
	hash func(dedupe.Ref) uint64 // tests make Refs collide with it
	tag  string                  // opens every token of this store
	// strings holds the tokens: one allocation per 128 claims.
	strings dedupekit.Strings

	// Records sit in numbered slots of pages. A hash table, dir, finds the
	// slot of a Ref's record, comparing Refs byte for byte; a token names
	// its record's slot, so Complete, Release and Extend reach the record
	// without hashing the Ref.
	mu    sync.Mutex
	pages []*page  // see rec; a free slot has claim number 0
	free  slotSet  // the free slots of pages
	dir   []*table // see lookup
	depth uint     // len(dir) is 1<<depth
	top   int      // the tables whose depth is depth
	used  int      // the records in pages, and cells in use in dir
	seq   uint64   // the number of the last claim
	hand  uint32   // the next slot expire examines
}

var _ dedupe.Store = (*Store)(nil)

// A record is a Ref's claim, processing or done, live or expired. Its Ref
// was valid when it was claimed, so the calls that find
// theirs in a record do not validate it again; those that do not validate
// it to tell msgkey.ErrInvalid from ErrLeaseLost.
type record struct {
	ref   dedupe.Ref
	until time.Time // lease end when processing, retention end when done
	fp    string
	trace string // the completion's trace, when done
	seq   uint64 // the claim that made the record; its owner's token holds it
	hash  uint32 // the low half of ref's hash, which files it in dir
	done  bool
}

func (c *Config) setDefaults() {
	if c.Now == nil {
		start := time.Now()
		c.Now = func() time.Time { return start.Add(time.Since(start)) }
	}
}

// New returns an empty Store.
func New(cfg Config) *Store {
	cfg.setDefaults()
	seed := maphash.MakeSeed()
	return &Store{
		now:  cfg.Now,
		hash: func(r dedupe.Ref) uint64 { return maphash.Comparable(seed, r) },
		tag:  newTag(),
		dir:  []*table{newTable(minCells, 0, 0)},
		top:  1,
	}
}

// Claim implements [dedupe.Store].
func (s *Store) Claim(ctx context.Context, items []dedupe.Item, lease time.Duration) ([]dedupe.ClaimResult, []error, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("memdedupe: claim: %w", err)
	}
	if lease <= 0 {
		return nil, nil, fmt.Errorf("memdedupe: claim: lease %v must be positive", lease)
	}
	res := make([]dedupe.ClaimResult, len(items))
	errs := dedupekit.NoErrors(len(items))
	for i, it := range items {
		if err := dedupekit.CheckClaim(it.Namespace, it.Group, it.Key, lease, it.Fingerprint); err != nil {
			errs = dedupekit.SetError(errs, i, fmt.Errorf("memdedupe: claim %q: %w", it.Ref, err))
			continue
		}
		res[i] = s.claim(it, lease)
	}
	return res, errs, nil
}

// claim claims req, a valid item, for lease.
func (s *Store) claim(req dedupe.Item, lease time.Duration) dedupe.ClaimResult {
	h := uint32(s.hash(req.Ref))
	s.mu.Lock()
	now := s.now()
	s.expire(now)
	t, p, i, found := s.lookup(h, req.Ref)
	if found && now.Before(s.rec(i).until) {
		r := *s.rec(i)
		s.mu.Unlock()
		switch {
		case dedupekit.FingerprintsConflict(r.fp, req.Fingerprint):
			return dedupe.ClaimResult{Outcome: dedupe.Reused}
		case r.done:
			return dedupe.ClaimResult{Outcome: dedupe.Suppressed, Until: r.until, Remaining: r.until.Sub(now), Trace: r.trace}
		default:
			return dedupe.ClaimResult{Outcome: dedupe.Busy, Until: r.until, Remaining: r.until.Sub(now)}
		}
	}
	// An expired record counts as none: the claim takes its slot over.
	if !found {
		i = s.slot()
		s.file(t, p, h, i)
	}
	s.seq++
	seq := s.seq
	*s.rec(i) = record{ref: req.Ref, until: now.Add(lease), fp: req.Fingerprint, seq: seq, hash: h}
	s.mu.Unlock()
	return dedupe.ClaimResult{Outcome: dedupe.Acquired, Token: s.token(i, seq)}
}

// Complete implements [dedupe.Store].
func (s *Store) Complete(ctx context.Context, ts []dedupe.Ticket, retention time.Duration) ([]error, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memdedupe: complete: %w", err)
	}
	if retention <= 0 {
		return nil, fmt.Errorf("memdedupe: complete: retention %v must be positive", retention)
	}
	return each(ts, func(t dedupe.Ticket) error { return s.complete(t, retention) }), nil
}

// Release implements [dedupe.Store].
func (s *Store) Release(ctx context.Context, ts []dedupe.Ticket) ([]error, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memdedupe: release: %w", err)
	}
	return each(ts, s.release), nil
}

// each returns f's answer for every ticket of ts, in order.
func each(ts []dedupe.Ticket, f func(dedupe.Ticket) error) []error {
	errs := dedupekit.NoErrors(len(ts))
	for i, t := range ts {
		if err := f(t); err != nil {
			errs = dedupekit.SetError(errs, i, err)
		}
	}
	return errs
}

// complete completes t for retention.
func (s *Store) complete(t dedupe.Ticket, retention time.Duration) error {
	i, seq := s.parse(t.Token)
	s.mu.Lock()
	now := s.now()
	// A done record was completed by this token before: this is a retry.
	if r := s.record(i, seq, t.Ref); r != nil && now.Before(r.until) {
		r.done, r.until, r.trace = true, now.Add(retention), dedupekit.KeptTrace(t.Trace)
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	return lost("complete", t.Ref)
}

// release releases t.
func (s *Store) release(t dedupe.Ticket) error {
	i, seq := s.parse(t.Token)
	s.mu.Lock()
	if r := s.record(i, seq, t.Ref); r != nil && !r.done && s.now().Before(r.until) {
		s.drop(i)
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	return lost("release", t.Ref)
}

// Extend implements [dedupe.Store].
func (s *Store) Extend(ctx context.Context, t dedupe.Ticket, lease time.Duration) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memdedupe: extend %q: %w", t.Ref, err)
	}
	if lease <= 0 {
		return invalid("extend", t.Ref, fmt.Errorf("lease %v must be positive", lease))
	}
	i, seq := s.parse(t.Token)
	s.mu.Lock()
	now := s.now()
	if r := s.record(i, seq, t.Ref); r != nil && !r.done && now.Before(r.until) {
		r.until = now.Add(lease)
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	return lost("extend", t.Ref)
}

// record returns the record in slot i if claim number seq made it for ref,
// expired or not, and nil if it is gone. s.mu must be held.
func (s *Store) record(i uint32, seq uint64, ref dedupe.Ref) *record {
	if seq == 0 || i >= s.slots() {
		return nil
	}
	if r := s.rec(i); r.seq == seq && r.ref == ref {
		return r
	}
	return nil
}

// A token is the store's tag, then the slot (32 bits) and the claim
// number (64 bits) in 16 digits of base64url, 6 bits each: one spelling
// per record, so that no other spelling of a token matches, and 32 bytes
// in all.
const (
	tagLen  = 16
	digits  = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	halfLen = 8 // the digits of 48 bits
)

// digitOf is the inverse of digits, 0xff where a byte is none of them.
var digitOf = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i := range len(digits) {
		t[digits[i]] = byte(i)
	}
	return t
}()

// newTag returns tagLen digits drawn from crypto/rand: 96 bits.
func newTag() string {
	var b [tagLen]byte
	rand.Read(b[:])
	for i, c := range b {
		b[i] = digits[c&63]
	}
	return string(b[:])
}

// token returns the token of claim number seq, which took slot i.
func (s *Store) token(i uint32, seq uint64) string {
	var b [tagLen + 2*halfLen]byte
	copy(b[:], s.tag)
	putHalf(b[tagLen:tagLen+halfLen], uint64(i)<<16|seq>>48)
	putHalf(b[tagLen+halfLen:], seq)
	return s.strings.Make(b[:])
}

// parse returns the slot and claim number token holds, or claim number 0,
// which no claim has, if token is none of this store's.
func (s *Store) parse(token string) (uint32, uint64) {
	if len(token) != tagLen+2*halfLen || token[:tagLen] != s.tag {
		return 0, 0
	}
	hi, ok1 := half(token[tagLen : tagLen+halfLen])
	lo, ok2 := half(token[tagLen+halfLen:])
	if !ok1 || !ok2 {
		return 0, 0
	}
	return uint32(hi >> 16), hi<<48 | lo
}

// putHalf writes the low 48 bits of v in halfLen digits.
func putHalf(b []byte, v uint64) {
	for i := halfLen - 1; i >= 0; i-- {
		b[i] = digits[v&63]
		v >>= 6
	}
}

// half reads halfLen digits.
func half(s string) (uint64, bool) {
	var v uint64
	var bad byte
	for i := range halfLen {
		d := digitOf[s[i]]
		bad |= d
		v = v<<6 | uint64(d&63)
	}
	return v, bad&^63 == 0
}

// lost reports a call that found no lease of its ticket's: msgkey.ErrInvalid if
// ref could never have been claimed, else ErrLeaseLost.
func lost(op string, ref dedupe.Ref) error {
	if err := checkRef(ref); err != nil {
		return fmt.Errorf("memdedupe: %s %q: %w", op, ref, err)
	}
	return fmt.Errorf("memdedupe: %s %q: %w", op, ref, dedupe.ErrLeaseLost)
}

// invalid reports a call with a bad argument, or msgkey.ErrInvalid first if
// ref is bad too.
func invalid(op string, ref dedupe.Ref, err error) error {
	if rerr := checkRef(ref); rerr != nil {
		err = rerr
	}
	return fmt.Errorf("memdedupe: %s %q: %w", op, ref, err)
}

// checkRef reports whether ref can be stored.
func checkRef(ref dedupe.Ref) error {
	return dedupekit.CheckRef(ref.Namespace, ref.Group, ref.Key)
}

// check returns ctx's error if it is done, else err: a call on a cancelled
// context changes nothing, as it would against a remote store.
func check(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return err
}
