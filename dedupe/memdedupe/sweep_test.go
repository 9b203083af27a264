package memdedupe

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/testkit"
)

// TestSweep checks that expired records are dropped as the store grows, so
// that memory follows the live records, not every key ever seen, and that
// the memory a burst took is given back once its records have expired.
func TestSweep(t *testing.T) {
	clock := testkit.NewClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), 0)
	s := New(Config{Now: clock.Now})
	ctx := context.Background()
	n := 0
	claim := func(lease time.Duration) {
		t.Helper()
		n++
		key := fmt.Sprint("k", n)
		res, err := s.Claim(ctx, dedupe.ClaimRequest{Ref: dedupe.Ref{Group: "g", Key: key}, Lease: lease})
		if err != nil || res.Status != dedupe.Acquired {
			t.Fatalf("Claim(%q) = %v, %v", key, res.Status, err)
		}
	}
	// rounds claims a round of short-lived keys, then lets them expire, n
	// times, and checks what the store keeps.
	const live = 100
	rounds := func(n int) {
		t.Helper()
		for range n {
			for range minSweep {
				claim(time.Second)
			}
			clock.Add(time.Minute)
		}
		checkTable(t, s)
		if max := 2*minSweep + live; len(s.recs) > max || s.used > max {
			t.Errorf("%d slots and %d records kept for %d live ones", len(s.recs), s.used, live)
		}
		if max := 4 * (2*minSweep + live); cap(s.recs) > max || len(s.cells) > max {
			t.Errorf("room for %d slots and %d cells kept for %d live records", cap(s.recs), len(s.cells), live)
		}
	}
	for range live {
		claim(24 * time.Hour)
	}
	rounds(20)
	for range 16 * minSweep {
		claim(time.Second)
	}
	rounds(60)
	for i := range live {
		ref := dedupe.Ref{Group: "g", Key: fmt.Sprint("k", i+1)}
		if _, j, ok := s.lookup(uint32(s.hash(ref)), ref); !ok || s.recs[j].done {
			t.Fatalf("live record %v swept", ref)
		}
	}
}
