package memdedupe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/testkit"
)

// TestModel makes random calls on a Store and checks each answer against a
// plain map of the records the contract implies, with hashes that make
// every Ref, or many, share a home cell, some at the table's end so that
// probe runs wrap, so that the hash table's probing, its moves on deletion
// and its resizing, the slot reuse and the tokens are all exercised. Stale
// tokens, other keys' tokens and forged ones are tried alongside the
// owner's. A few keys keep the table at its smallest, where the checks run
// after every call; many make the store sweep, shrink and grow.
func TestModel(t *testing.T) {
	tests := []struct {
		name string
		hash func(dedupe.Ref) uint64
	}{
		{"maphash", nil},
		{"one home", func(dedupe.Ref) uint64 { return 7 }},
		{"three homes", func(r dedupe.Ref) uint64 { return uint64(len(r.Key)%3) * 1000 }},
		{"last cells", func(r dedupe.Ref) uint64 { return math.MaxUint32 - uint64(r.Key[len(r.Key)-1]%3) }},
	}
	sizes := []struct {
		name                    string
		keys, steps, checkEvery int
	}{
		{"few keys", minCells / 2, 5000, 1},
		{"many keys", 3 * minSweep, 20000, 1000},
	}
	for _, tc := range tests {
		for _, size := range sizes {
			t.Run(tc.name+"/"+size.name, func(t *testing.T) {
				t.Parallel()
				rng := rand.New(rand.NewPCG(1, uint64(len(tc.name))))
				clock := testkit.NewClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), 0)
				s := New(Config{Now: clock.Now})
				if tc.hash != nil {
					s.hash = tc.hash
				}
				runModel(t, rng, s, size.keys, size.steps, size.checkEvery, clock.Now, clock.Add)
			})
		}
	}
}

type modelRecord struct {
	token string
	done  bool
	until time.Time
	fp    string
}

func runModel(t *testing.T, rng *rand.Rand, s *Store, keys, steps, checkEvery int, now func() time.Time, advance func(time.Duration)) {
	ctx := context.Background()
	ref := func(k int) dedupe.Ref { return dedupe.Ref{Group: "g", Key: fmt.Sprint("k", k)} }
	model := make(map[dedupe.Ref]modelRecord)
	issued := make(map[string]bool)      // every token Claim returned
	var tokens []string                  // the same, in order
	token := func(r dedupe.Ref) string { // the owner's, a stale or foreign one, or a forgery
		switch n := rng.IntN(8); {
		case n < 5 || len(tokens) == 0:
			return model[r].token
		case n < 7:
			return tokens[rng.IntN(len(tokens))]
		default:
			tok := []byte(tokens[rng.IntN(len(tokens))])
			tok[rng.IntN(len(tok))] ^= 1 << rng.IntN(8)
			return string(tok)
		}
	}
	for step := range steps {
		r := ref(rng.IntN(keys))
		m, ok := model[r]
		live := ok && now().Before(m.until)
		switch op := rng.IntN(10); {
		case op < 4:
			fp := fmt.Sprint(rng.IntN(3))
			lease := time.Duration(1+rng.IntN(5)) * time.Second
			res, err := s.Claim(ctx, dedupe.ClaimRequest{Ref: r, Lease: lease, Fingerprint: fp})
			want := dedupe.ClaimResult{Status: dedupe.Acquired}
			switch {
			case live && dedupe.FingerprintsConflict(m.fp, fp):
				want.Status = dedupe.Conflict
			case live && m.done:
				want = dedupe.ClaimResult{Status: dedupe.Done, Until: m.until, Remaining: m.until.Sub(now())}
			case live:
				want = dedupe.ClaimResult{Status: dedupe.InFlight, Until: m.until, Remaining: m.until.Sub(now())}
			}
			if want.Status == dedupe.Acquired {
				if err != nil || res.Status != dedupe.Acquired || issued[res.Token] {
					t.Fatalf("step %d: Claim(%v) = %+v, %v; want acquired with a new token", step, r, res, err)
				}
				issued[res.Token] = true
				tokens = append(tokens, res.Token)
				model[r] = modelRecord{token: res.Token, until: now().Add(lease), fp: fp}
			} else if err != nil || res != want {
				t.Fatalf("step %d: Claim(%v) = %+v, %v; want %+v", step, r, res, err, want)
			}
		case op < 6:
			tok := token(r)
			err := s.Complete(ctx, dedupe.Ticket{Ref: r, Token: tok}, 4*time.Second)
			if live && tok == m.token {
				m.done, m.until = true, now().Add(4*time.Second)
				model[r] = m
				if err != nil {
					t.Fatalf("step %d: Complete(%v) by its owner: %v", step, r, err)
				}
			} else if !errors.Is(err, dedupe.ErrLeaseLost) {
				t.Fatalf("step %d: Complete(%v) with token %q = %v, want ErrLeaseLost", step, r, tok, err)
			}
		case op < 7:
			tok := token(r)
			err := s.Release(ctx, dedupe.Ticket{Ref: r, Token: tok})
			if live && !m.done && tok == m.token {
				delete(model, r)
				if err != nil {
					t.Fatalf("step %d: Release(%v) by its owner: %v", step, r, err)
				}
			} else if !errors.Is(err, dedupe.ErrLeaseLost) {
				t.Fatalf("step %d: Release(%v) with token %q = %v, want ErrLeaseLost", step, r, tok, err)
			}
		case op < 8:
			tok := token(r)
			lease := time.Duration(1+rng.IntN(5)) * time.Second
			err := s.Extend(ctx, dedupe.Ticket{Ref: r, Token: tok}, lease)
			if live && !m.done && tok == m.token {
				m.until = now().Add(lease)
				model[r] = m
				if err != nil {
					t.Fatalf("step %d: Extend(%v) by its owner: %v", step, r, err)
				}
			} else if !errors.Is(err, dedupe.ErrLeaseLost) {
				t.Fatalf("step %d: Extend(%v) with token %q = %v, want ErrLeaseLost", step, r, tok, err)
			}
		default:
			advance(time.Duration(rng.IntN(300)) * time.Millisecond)
		}
		if step%checkEvery == 0 {
			checkTable(t, s)
		}
	}
	checkTable(t, s)
}

// checkTable checks that the slots, the free list and the hash table agree.
func checkTable(t *testing.T, s *Store) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	inUse := 0
	for i, r := range s.recs {
		if r.seq == 0 {
			continue
		}
		inUse++
		if _, j, ok := s.lookup(r.hash, r.ref); !ok || j != uint32(i) {
			t.Fatalf("record %v in slot %d: lookup = slot %d, %v", r.ref, i, j, ok)
		}
	}
	cells := 0
	for _, c := range s.cells {
		if c != 0 {
			cells++
			if i := uint32(c) - 1; s.recs[i].seq == 0 || s.recs[i].hash != uint32(c>>32) {
				t.Fatalf("cell %#x names slot %d, which holds %+v", c, i, s.recs[i])
			}
		}
	}
	free := make(map[uint32]bool)
	for _, i := range s.free {
		if free[i] || s.recs[i].seq != 0 {
			t.Fatalf("free list holds slot %d twice or in use", i)
		}
		free[i] = true
	}
	if inUse != s.used || cells != s.used || inUse+len(free) != len(s.recs) {
		t.Fatalf("%d slots in use, %d cells, %d counted, %d free of %d slots", inUse, cells, s.used, len(free), len(s.recs))
	}
	if float64(s.used) > maxLoad*float64(len(s.cells)) {
		t.Fatalf("%d of %d cells in use", s.used, len(s.cells))
	}
}
