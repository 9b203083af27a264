package memdedupe

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/testkit"
)

// TestExpiry checks that expired records are dropped as claims come, so
// that memory follows the live records, not every key ever seen: once a
// burst has expired, its pages and the cells of its tables are given back,
// and the directory it deepened halves again. With hashes that agree in
// their top bits, the one table grows past maxCells, as it cannot split,
// and shrinks back.
func TestExpiry(t *testing.T) {
	tests := []struct {
		name  string
		hash  func(dedupe.Ref) uint64
		burst int
	}{
		{"maphash", nil, 8 * maxCells},
		{"key numbers", func(r dedupe.Ref) uint64 {
			n, _ := strconv.Atoi(r.Key[1:])
			return uint64(n) // below 2^20 here: the top 12 bits agree
		}, 2 * maxCells},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := testkit.NewClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), 0)
			s := New(Config{Now: clock.Now})
			if tc.hash != nil {
				s.hash = tc.hash
			}
			ctx := context.Background()
			n := 0
			claim := func(lease time.Duration) {
				t.Helper()
				n++
				key := fmt.Sprint("k", n)
				res, err := testkit.Claim(ctx, s, dedupe.Item{Ref: dedupe.Ref{Group: "g", Key: key}}, lease)
				if err != nil || res.Outcome != dedupe.Acquired {
					t.Fatalf("Claim(%q) = %v, %v", key, res.Outcome, err)
				}
			}
			const live, round = 100, 1024
			for range live {
				claim(24 * time.Hour)
			}
			for range tc.burst {
				claim(time.Second)
			}
			checkTable(t, s)
			peakSlots, peakCells, peakDepth := s.slots(), cellsOf(s), s.depth
			if peakCells < tc.burst {
				t.Fatalf("%d cells for a burst of %d", peakCells, tc.burst)
			}
			// Rounds of short-lived keys, each expiring by the next.
			for range 10 {
				clock.Add(time.Minute)
				for range round {
					claim(time.Second)
				}
			}
			checkTable(t, s)
			// A round's records, the last one's and the live ones.
			if most := live + 2*round; s.used > most || int(s.slots()) > most+pageSize {
				t.Errorf("%d records in %d slots kept for %d live ones and a round of %d", s.used, s.slots(), live, round)
			}
			if most := 4 * (live + 2*round); cellsOf(s) > most || s.depth > 1 {
				t.Errorf("%d cells in a directory %d deep kept for at most %d records", cellsOf(s), s.depth, live+2*round)
			}
			t.Logf("after a burst of %d: %d slots, %d cells, directory %d deep; rounds of %d then left %d slots, %d cells, %d deep",
				tc.burst, peakSlots, peakCells, peakDepth, round, s.slots(), cellsOf(s), s.depth)
			for i := range live {
				ref := dedupe.Ref{Group: "g", Key: fmt.Sprint("k", i+1)}
				if _, _, j, ok := s.lookup(uint32(s.hash(ref)), ref); !ok || s.rec(j).done {
					t.Fatalf("live record %v dropped", ref)
				}
			}
		})
	}
}

// cellsOf returns the cells of s's tables.
func cellsOf(s *Store) int {
	n := 0
	for j := 0; j < len(s.dir); j += 1 << (s.depth - s.dir[j].depth) {
		n += len(s.dir[j].cells)
	}
	return n
}

// TestBoundedWork claims fresh keys on a clock that moves 1µs a claim, each
// leased for 2^20 µs, so that the store grows to a million records and then
// holds them while they expire, one a claim, for an eighth of a million
// more claims: the hand's pass over every slot. (Complete would neither
// expire records nor grow the store, and under the race detector would
// double the test's time.) It checks what each claim did, which a pass
// over every record or a copy of them would break: it drops at most
// expireStep records and adds or gives back at most one page, and no table
// outgrows maxCells. The slowest claim is logged as a figure, not
// asserted: a shared machine's pauses would make any bound near it flaky.
func TestBoundedWork(t *testing.T) {
	const records = 1 << 20
	clock := testkit.NewClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), 0)
	s := New(Config{Now: clock.Now})
	ctx := context.Background()
	var (
		lat  testkit.Latencies
		slow int // claims over a millisecond, past lat's buckets
	)
	for n := range records + records/8 {
		clock.Add(time.Microsecond)
		ref := dedupe.Ref{Group: "g", Key: strconv.Itoa(n)}
		used, pages := s.used, len(s.pages)
		start := time.Now()
		res, err := testkit.Claim(ctx, s, dedupe.Item{Ref: ref}, records*time.Microsecond)
		d := time.Since(start)
		lat.Add(d)
		if d > time.Millisecond {
			slow++
		}
		if err != nil || res.Outcome != dedupe.Acquired {
			t.Fatalf("Claim(%v) = %v, %v", ref, res.Outcome, err)
		}
		if dropped := used + 1 - s.used; dropped > expireStep {
			t.Fatalf("claim %d, at %d records, dropped %d", n, used, dropped)
		}
		if d := len(s.pages) - pages; d > 1 || d < -1 {
			t.Fatalf("claim %d, at %d records, moved the pages from %d to %d", n, used, pages, len(s.pages))
		}
	}
	for j := 0; j < len(s.dir); j += 1 << (s.depth - s.dir[j].depth) {
		if n := len(s.dir[j].cells); n > maxCells {
			t.Fatalf("a table of %d cells: depth %d of %d, prefix %#x, %d used", n, s.dir[j].depth, s.depth, s.dir[j].prefix, s.dir[j].used)
		}
	}
	if s.used < records {
		t.Fatalf("%d records, want a million or more", s.used)
	}
	t.Logf("%d records in %d slots, directory of %d: of %d claims, 99.9%% took under %v, %d over 1ms, the slowest %v",
		s.used, s.slots(), len(s.dir), records+records/8, lat.Quantile(0.999), slow, lat.Max())
}
