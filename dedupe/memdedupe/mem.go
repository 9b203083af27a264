// Package memdedupe is an in-memory [dedupe.Store] for unit tests and the
// zero-dependency quickstart.
//
// Records live in one process and vanish with it, so it deduplicates only
// what that process sees: use redisdedupe or sqldedupe when consumers run in
// more than one process or must survive a restart. Expired records are swept
// as the store grows and the memory they took is given back, so memory
// follows the live records.
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
	"math"
	"sync"
	"time"

	"github.com/idemq/idemq/dedupe"
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

// minSweep is the record count below which the store never sweeps: scanning
// a few slots costs more than the memory it would free.
const minSweep = 1024

// Store is an in-memory dedupe store, safe for concurrent use.
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

	// Records sit in slots of recs. An open-addressing hash table, cells,
	// finds the slot of a Ref's record, comparing Refs byte for byte; a
	// token names its record's slot, so Complete, Release and Extend reach
	// the record without hashing the Ref.
	mu      sync.Mutex
	recs    []record // by slot; a free slot has claim number 0
	free    []uint32 // the free slots of recs, the lowest last
	cells   []uint64 // see lookup
	used    int      // the records in recs and cells in use
	seq     uint64   // the number of the last claim
	sweepAt int      // sweep when a claim finds used at this
}

var _ dedupe.Store = (*Store)(nil)

// A record is a Ref's claim, processing or done, live or expired. Its Ref
// passed [dedupe.Ref.Validate] when it was claimed, so the calls that find
// theirs in a record do not validate it again; those that do not validate
// it to tell ErrInvalidKey from ErrLeaseLost.
type record struct {
	ref   dedupe.Ref
	until time.Time // lease end when processing, retention end when done
	fp    string
	seq   uint64 // the claim that made the record; its owner's token holds it
	hash  uint32 // the low half of ref's hash, which files it in cells
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
		now:     cfg.Now,
		hash:    func(r dedupe.Ref) uint64 { return maphash.Comparable(seed, r) },
		tag:     newTag(),
		cells:   make([]uint64, minCells),
		sweepAt: minSweep,
	}
}

// Claim implements [dedupe.Store].
func (s *Store) Claim(ctx context.Context, req dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	if err := check(ctx, req.Validate()); err != nil {
		return dedupe.ClaimResult{}, fmt.Errorf("memdedupe: claim %q: %w", req.Ref, err)
	}
	h := uint32(s.hash(req.Ref))
	s.mu.Lock()
	now := s.now()
	if s.used >= s.sweepAt {
		s.sweep(now)
	}
	p, i, found := s.lookup(h, req.Ref)
	if found && now.Before(s.recs[i].until) {
		r := s.recs[i]
		s.mu.Unlock()
		switch {
		case dedupe.FingerprintsConflict(r.fp, req.Fingerprint):
			return dedupe.ClaimResult{Status: dedupe.Conflict}, nil
		case r.done:
			return dedupe.ClaimResult{Status: dedupe.Done, Until: r.until, Remaining: r.until.Sub(now)}, nil
		default:
			return dedupe.ClaimResult{Status: dedupe.InFlight, Until: r.until, Remaining: r.until.Sub(now)}, nil
		}
	}
	// An expired record counts as none: the claim takes its slot over.
	if !found {
		i = s.slot()
		s.file(p, h, i)
	}
	s.seq++
	seq := s.seq
	s.recs[i] = record{ref: req.Ref, until: now.Add(req.Lease), fp: req.Fingerprint, seq: seq, hash: h}
	s.mu.Unlock()
	return dedupe.ClaimResult{Status: dedupe.Acquired, Token: s.token(i, seq)}, nil
}

// Complete implements [dedupe.Store].
func (s *Store) Complete(ctx context.Context, t dedupe.Ticket, retention time.Duration) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memdedupe: complete %q: %w", t.Ref, err)
	}
	if retention <= 0 {
		return invalid("complete", t.Ref, fmt.Errorf("retention %v must be positive", retention))
	}
	i, seq := s.parse(t.Token)
	s.mu.Lock()
	now := s.now()
	// A done record was completed by this token before: this is a retry.
	if r := s.record(i, seq, t.Ref); r != nil && now.Before(r.until) {
		r.done, r.until = true, now.Add(retention)
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	return lost("complete", t.Ref)
}

// Release implements [dedupe.Store].
func (s *Store) Release(ctx context.Context, t dedupe.Ticket) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memdedupe: release %q: %w", t.Ref, err)
	}
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
	if seq == 0 || uint(i) >= uint(len(s.recs)) {
		return nil
	}
	if r := &s.recs[i]; r.seq == seq && r.ref == ref {
		return r
	}
	return nil
}

// slot returns a free slot, taken off the free list or added to recs.
// s.mu must be held.
func (s *Store) slot() uint32 {
	if n := len(s.free); n > 0 {
		i := s.free[n-1]
		s.free = s.free[:n-1]
		return i
	}
	if len(s.recs) == math.MaxUint32 {
		panic("memdedupe: 2^32-1 records") // a cell holds slot+1 in 32 bits
	}
	s.recs = append(s.recs, record{})
	return uint32(len(s.recs) - 1)
}

// drop deletes the record in slot i and frees the slot. s.mu must be held.
func (s *Store) drop(i uint32) {
	s.unfile(s.recs[i].hash, i)
	s.recs[i] = record{}
	s.free = append(s.free, i)
}

// sweep deletes expired records, sets the next sweep at twice the records
// left or half the slots, whichever is more, and sizes the slots and the
// table for the records there may be by then, giving back the memory of
// any more. A sweep reads every slot and cell, and between two sweeps come
// at least a quarter as many claims as there are slots, so sweeping costs
// amortised O(1) per claim. s.mu must be held.
func (s *Store) sweep(now time.Time) {
	// The free slots are listed from the highest down, so that claims take
	// the lowest first and the highest, left to expire, can be cut off.
	s.free = s.free[:0]
	s.used = 0
	for i := len(s.recs) - 1; i >= 0; i-- {
		r := &s.recs[i]
		if r.seq != 0 && !now.Before(r.until) {
			*r = record{}
		}
		switch {
		case r.seq != 0:
			s.used++
		case i == len(s.recs)-1:
			s.recs = s.recs[:i]
		default:
			s.free = append(s.free, uint32(i))
		}
	}
	s.sweepAt = max(2*s.used, len(s.recs)/2, minSweep)
	// Until the next sweep, slots are added only while none is free, so
	// there are at most sweepAt; room for four times as many is given back,
	// keeping twice, so that the next sweeps do not regrow it.
	if n := max(len(s.recs), s.sweepAt); cap(s.recs) > 4*n {
		s.recs = append(make([]record, 0, 2*n), s.recs...)
		s.free = append(make([]uint32, 0, 2*n), s.free...)
	}
	// Filing the records left afresh costs less than taking each expired
	// one out. The table is sized for sweepAt records, or kept if it fits
	// them and is not four times too big.
	n := minCells
	for float64(s.sweepAt) > maxLoad*float64(n) {
		n *= 2
	}
	if len(s.cells) < n || len(s.cells) > 4*n {
		s.cells = make([]uint64, n)
	} else {
		clear(s.cells)
	}
	for i := range s.recs {
		if r := &s.recs[i]; r.seq != 0 {
			s.put(uint64(r.hash)<<32 | uint64(i+1))
		}
	}
}

// The hash table is a power of two cells, at most maxLoad of them in use
// so that probe runs stay short, with linear probing. A cell is 0 when
// empty, else the low half of its Ref's hash, which places it, then its
// record's slot plus one: eight bytes and no pointer, so the table is
// small, cheap to grow and not scanned by the garbage collector.
const (
	minCells = 64
	maxLoad  = 0.75
)

// lookup returns the slot of ref's record, found by its hash h, or, if it
// has none, the empty cell where it goes. s.mu must be held.
func (s *Store) lookup(h uint32, ref dedupe.Ref) (cell int, slot uint32, found bool) {
	mask := len(s.cells) - 1
	for p := int(h) & mask; ; p = (p + 1) & mask {
		c := s.cells[p]
		if c == 0 {
			return p, 0, false
		}
		if uint32(c>>32) == h {
			if i := uint32(c) - 1; s.recs[i].ref == ref {
				return p, i, true
			}
		}
	}
}

// file puts slot i, whose Ref hashes to h, in the empty cell p that lookup
// returned, and doubles the table if that puts it past maxLoad. s.mu must
// be held.
func (s *Store) file(p int, h uint32, i uint32) {
	s.cells[p] = uint64(h)<<32 | uint64(i+1)
	s.used++
	if float64(s.used) > maxLoad*float64(len(s.cells)) {
		s.rehash(2 * len(s.cells))
	}
}

// rehash moves the table to n cells. s.mu must be held.
func (s *Store) rehash(n int) {
	old := s.cells
	s.cells = make([]uint64, n)
	for _, c := range old {
		if c != 0 {
			s.put(c)
		}
	}
}

// put puts cell c in the first empty cell from its home on. s.mu must be
// held.
func (s *Store) put(c uint64) {
	mask := len(s.cells) - 1
	p := int(c>>32) & mask
	for s.cells[p] != 0 {
		p = (p + 1) & mask
	}
	s.cells[p] = c
}

// unfile takes slot i, whose Ref hashes to h, out of the table, moving back
// the cells after it in its probe run that lookup would no longer reach
// past the gap. s.mu must be held.
func (s *Store) unfile(h uint32, i uint32) {
	mask := len(s.cells) - 1
	p := int(h) & mask
	for uint32(s.cells[p]) != i+1 {
		p = (p + 1) & mask
	}
	for q := p; ; {
		s.cells[p] = 0
		// Find the next cell of the run that may fill the gap at p: one
		// whose home, where its probe starts, is not in (p, q].
		for {
			q = (q + 1) & mask
			c := s.cells[q]
			if c == 0 {
				s.used--
				return
			}
			home := int(c>>32) & mask
			if p <= q && (home <= p || home > q) || p > q && home <= p && home > q {
				s.cells[p] = c
				p = q
				break
			}
		}
	}
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
	return string(b[:])
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

// lost reports a call that found no lease of its ticket's: ErrInvalidKey if
// ref could never have been claimed, else ErrLeaseLost.
func lost(op string, ref dedupe.Ref) error {
	if err := ref.Validate(); err != nil {
		return fmt.Errorf("memdedupe: %s %q: %w", op, ref, err)
	}
	return fmt.Errorf("memdedupe: %s %q: %w", op, ref, dedupe.ErrLeaseLost)
}

// invalid reports a call with a bad argument, or ErrInvalidKey first if
// ref is bad too.
func invalid(op string, ref dedupe.Ref, err error) error {
	if rerr := ref.Validate(); rerr != nil {
		err = rerr
	}
	return fmt.Errorf("memdedupe: %s %q: %w", op, ref, err)
}

// check returns ctx's error if it is done, else err: a call on a cancelled
// context changes nothing, as it would against a remote store.
func check(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return err
}
