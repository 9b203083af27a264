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
	"github.com/idemq/idemq/internal/dedupekit"
	"github.com/idemq/idemq/internal/testkit"
)

// TestModel makes random calls on a Store and checks each answer against a
// plain map of the records the contract implies, with hashes that make
// every Ref, or many, share a home cell, some at the table's end so that
// probe runs wrap, so that the hash table's probing, its moves on deletion
// and its resizing, the slot reuse and the tokens are all exercised. Stale
// tokens, other keys' tokens and forged ones are tried alongside the
// owner's. A few keys keep the table at its smallest, where the checks run
// after every call; many make the store expire records, shrink and grow;
// with maphash, a slow clock with rare jumps makes the directory split its
// tables many times, then merge them.
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
		tick                    time.Duration // the clock moves up to 300 ticks at a time
		jumpEvery               int           // and a minute once in so many moves, if set
	}{
		{"few keys", minCells / 2, 5000, 1, time.Millisecond, 0},
		{"many keys", 3 * maxCells, 20000, 1000, time.Millisecond, 0},
		{"deep directory", 4 * maxCells, 60000, 2000, 2 * time.Microsecond, 2500},
	}
	for _, tc := range tests {
		for _, size := range sizes {
			if size.jumpEvery != 0 && tc.hash != nil {
				continue // thousands of records on one home: quadratic
			}
			t.Run(tc.name+"/"+size.name, func(t *testing.T) {
				t.Parallel()
				rng := rand.New(rand.NewPCG(1, uint64(len(tc.name))))
				clock := testkit.NewClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), 0)
				s := New(Config{Now: clock.Now})
				if tc.hash != nil {
					s.hash = tc.hash
				}
				advance := func() {
					if size.jumpEvery != 0 && rng.IntN(size.jumpEvery) == 0 {
						clock.Add(time.Minute)
						return
					}
					clock.Add(time.Duration(rng.IntN(300)) * size.tick)
				}
				deepest, halved := runModel(t, rng, s, size.keys, size.steps, size.checkEvery, clock.Now, advance)
				if size.jumpEvery != 0 && (deepest < 2 || halved == 0) {
					t.Errorf("directory at most %d deep, halved %d times: the test leaves splits of split tables, or merges, untried", deepest, halved)
				}
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

// runModel returns the deepest the directory was and how many times it
// halved.
func runModel(t *testing.T, rng *rand.Rand, s *Store, keys, steps, checkEvery int, now func() time.Time, advance func()) (deepest uint, halved int) {
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
	var depth uint
	for step := range steps {
		r := ref(rng.IntN(keys))
		m, ok := model[r]
		live := ok && now().Before(m.until)
		switch op := rng.IntN(10); {
		case op < 4:
			fp := fmt.Sprint(rng.IntN(3))
			lease := time.Duration(1+rng.IntN(5)) * time.Second
			res, err := testkit.Claim(ctx, s, dedupe.Item{Ref: r, Fingerprint: fp}, lease)
			want := dedupe.ClaimResult{Outcome: dedupe.Acquired}
			switch {
			case live && dedupekit.FingerprintsConflict(m.fp, fp):
				want.Outcome = dedupe.Reused
			case live && m.done:
				want = dedupe.ClaimResult{Outcome: dedupe.Suppressed, Until: m.until, Remaining: m.until.Sub(now())}
			case live:
				want = dedupe.ClaimResult{Outcome: dedupe.Busy, Until: m.until, Remaining: m.until.Sub(now())}
			}
			if want.Outcome == dedupe.Acquired {
				if err != nil || res.Outcome != dedupe.Acquired || issued[res.Token] {
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
			err := testkit.Complete(ctx, s, dedupe.Ticket{Ref: r, Token: tok}, 4*time.Second)
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
			err := testkit.Release(ctx, s, dedupe.Ticket{Ref: r, Token: tok})
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
			advance()
		}
		if s.depth < depth {
			halved++
		}
		depth = s.depth
		deepest = max(deepest, depth)
		if step%checkEvery == 0 {
			checkTable(t, s)
		}
	}
	checkTable(t, s)
	return deepest, halved
}

// checkTable checks that the pages, the free slots and the hash table
// agree, and that every table is within its load and its run of the
// directory.
func checkTable(t *testing.T, s *Store) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	inUse := 0
	for i := range s.slots() {
		r := s.rec(i)
		if free := bitSet(s.free.lv[0], i); free != (r.seq == 0) {
			t.Fatalf("slot %d holds %+v; in the free set: %v", i, *r, free)
		}
		if r.seq == 0 {
			continue
		}
		inUse++
		if _, _, j, ok := s.lookup(r.hash, r.ref); !ok || j != i {
			t.Fatalf("record %v in slot %d: lookup = slot %d, %v", r.ref, i, j, ok)
		}
	}
	for l, words := range s.free.lv {
		for w, x := range words {
			if l == 0 && x != 0 && uint32(w)*64 >= s.slots() {
				t.Fatalf("free set holds slots from %d past the %d slots", w*64, s.slots())
			}
			if l+1 < len(s.free.lv) && (x != 0) != bitSet(s.free.lv[l+1], uint32(w)) {
				t.Fatalf("free set level %d: word %d is %#x, its bit above disagrees", l, w, x)
			}
		}
	}
	if len(s.dir) != 1<<s.depth {
		t.Fatalf("directory of %d at depth %d", len(s.dir), s.depth)
	}
	cells, top := 0, 0
	for j := 0; j < len(s.dir); {
		tb := s.dir[j]
		shift := s.depth - tb.depth
		if tb.depth > s.depth || j != int(tb.prefix<<shift) {
			t.Fatalf("directory entry %d at depth %d: table of prefix %#x at depth %d", j, s.depth, tb.prefix, tb.depth)
		}
		for k := j; k < j+1<<shift; k++ {
			if s.dir[k] != tb {
				t.Fatalf("directory entries %d and %d of one table's run differ", j, k)
			}
		}
		n := 0
		for _, c := range tb.cells {
			if c == 0 {
				continue
			}
			n++
			h, i := uint32(c>>32), uint32(c)-1
			if h>>(32-tb.depth) != tb.prefix {
				t.Fatalf("cell %#x in the table of prefix %#x at depth %d", c, tb.prefix, tb.depth)
			}
			if i >= s.slots() || s.rec(i).seq == 0 || s.rec(i).hash != h {
				t.Fatalf("cell %#x names slot %d of %d", c, i, s.slots())
			}
		}
		if n != tb.used || n > capacity(len(tb.cells)) {
			t.Fatalf("table of prefix %#x: %d cells of %d in use, %d counted", tb.prefix, n, len(tb.cells), tb.used)
		}
		if tb.depth == s.depth {
			top++
		}
		cells += n
		j += 1 << shift
	}
	if top != s.top || s.depth > 0 && top == 0 {
		t.Fatalf("%d tables at the directory's depth %d, %d counted", top, s.depth, s.top)
	}
	if inUse != s.used || cells != s.used {
		t.Fatalf("%d slots in use, %d cells, %d counted", inUse, cells, s.used)
	}
}

// bitSet reports whether bit i of words is set.
func bitSet(words []uint64, i uint32) bool {
	w := int(i / 64)
	return w < len(words) && words[w]>>(i%64)&1 != 0
}
