// Package memdedupe is an in-memory [dedupe.Store] for unit tests and the
// zero-dependency quickstart.
//
// Records live in one process and vanish with it, so it deduplicates only
// what that process sees: use redisdedupe or sqldedupe when consumers run in
// more than one process or must survive a restart. Expired records are swept
// as the store grows, so memory stays proportional to the live records.
package memdedupe

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"time"

	"github.com/idemq/idemq/dedupe"
)

// Config holds a Store's optional settings. The zero value works.
type Config struct {
	// Now is the store's clock, which decides every lease and retention.
	// Default time.Now. Tests set it to step through leases and retention
	// without sleeping.
	Now func() time.Time
}

// minSweep is the record count below which the store never sweeps: scanning
// a small map costs more than the memory it would free.
const minSweep = 1024

// Store is an in-memory dedupe store, safe for concurrent use.
type Store struct {
	now func() time.Time

	mu      sync.Mutex
	recs    map[dedupe.Ref]record
	sweepAt int // sweep expired records once len(recs) reaches this
}

var _ dedupe.Store = (*Store)(nil)

type record struct {
	done  bool
	token string
	fp    string
	until time.Time // lease end when processing, retention end when done
}

// New returns an empty Store.
func New(cfg Config) *Store {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Store{now: cfg.Now, recs: make(map[dedupe.Ref]record), sweepAt: minSweep}
}

// Claim implements [dedupe.Store].
func (s *Store) Claim(ctx context.Context, req dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	if err := check(ctx, req.Validate()); err != nil {
		return dedupe.ClaimResult{}, fmt.Errorf("memdedupe: claim %q: %w", req.Ref, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if r, ok := s.recs[req.Ref]; ok && now.Before(r.until) {
		switch {
		case dedupe.FingerprintsConflict(r.fp, req.Fingerprint):
			return dedupe.ClaimResult{Status: dedupe.Conflict}, nil
		case r.done:
			return dedupe.ClaimResult{Status: dedupe.Done, Until: r.until, Remaining: r.until.Sub(now)}, nil
		default:
			return dedupe.ClaimResult{Status: dedupe.InFlight, Until: r.until, Remaining: r.until.Sub(now)}, nil
		}
	}
	token := rand.Text()
	s.recs[req.Ref] = record{token: token, fp: req.Fingerprint, until: now.Add(req.Lease)}
	if len(s.recs) >= s.sweepAt {
		s.sweep(now)
	}
	return dedupe.ClaimResult{Status: dedupe.Acquired, Token: token}, nil
}

// Complete implements [dedupe.Store].
func (s *Store) Complete(ctx context.Context, t dedupe.Ticket, retention time.Duration) error {
	err := t.Ref.Validate()
	if err == nil && retention <= 0 {
		err = fmt.Errorf("retention %v must be positive", retention)
	}
	if err := check(ctx, err); err != nil {
		return fmt.Errorf("memdedupe: complete %q: %w", t.Ref, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	r, ok := s.recs[t.Ref]
	if !ok || r.token != t.Token || !now.Before(r.until) {
		return fmt.Errorf("memdedupe: complete %q: %w", t.Ref, dedupe.ErrLeaseLost)
	}
	// A done record was completed by this token before: this is a retry.
	r.done, r.until = true, now.Add(retention)
	s.recs[t.Ref] = r
	return nil
}

// Release implements [dedupe.Store].
func (s *Store) Release(ctx context.Context, t dedupe.Ticket) error {
	if err := check(ctx, t.Ref.Validate()); err != nil {
		return fmt.Errorf("memdedupe: release %q: %w", t.Ref, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.owned(t); !ok {
		return fmt.Errorf("memdedupe: release %q: %w", t.Ref, dedupe.ErrLeaseLost)
	}
	delete(s.recs, t.Ref)
	return nil
}

// Extend implements [dedupe.Store].
func (s *Store) Extend(ctx context.Context, t dedupe.Ticket, lease time.Duration) error {
	err := t.Ref.Validate()
	if err == nil && lease <= 0 {
		err = fmt.Errorf("lease %v must be positive", lease)
	}
	if err := check(ctx, err); err != nil {
		return fmt.Errorf("memdedupe: extend %q: %w", t.Ref, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.owned(t)
	if !ok {
		return fmt.Errorf("memdedupe: extend %q: %w", t.Ref, dedupe.ErrLeaseLost)
	}
	r.until = s.now().Add(lease)
	s.recs[t.Ref] = r
	return nil
}

// owned returns t's record if t holds its live lease. s.mu must be held.
func (s *Store) owned(t dedupe.Ticket) (record, bool) {
	r, ok := s.recs[t.Ref]
	return r, ok && !r.done && r.token == t.Token && s.now().Before(r.until)
}

// sweep deletes expired records and sets the next sweep at twice the live
// count, so sweeping costs amortised O(1) per claim. s.mu must be held.
func (s *Store) sweep(now time.Time) {
	for ref, r := range s.recs {
		if !now.Before(r.until) {
			delete(s.recs, ref)
		}
	}
	s.sweepAt = max(2*len(s.recs), minSweep)
}

// check returns ctx's error if it is done, else err: a call on a cancelled
// context changes nothing, as it would against a remote store.
func check(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return err
}
