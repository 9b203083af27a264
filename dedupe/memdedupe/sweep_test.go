package memdedupe

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
)

// TestSweep checks that expired records are dropped as the store grows, so
// that memory follows the live records, not every key ever seen.
func TestSweep(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	s := New(Config{Now: func() time.Time { return now }})
	ctx := context.Background()
	claim := func(key string, lease time.Duration) {
		t.Helper()
		res, err := s.Claim(ctx, dedupe.ClaimRequest{Ref: dedupe.Ref{Group: "g", Key: key}, Lease: lease})
		if err != nil || res.Status != dedupe.Acquired {
			t.Fatalf("Claim(%q) = %v, %v", key, res.Status, err)
		}
	}
	const live = 100
	for i := range live {
		claim(fmt.Sprint("live", i), time.Hour)
	}
	for round := range 20 {
		for i := range minSweep {
			claim(fmt.Sprint("short", round, "-", i), time.Second)
		}
		now = now.Add(time.Minute)
	}
	if n := len(s.recs); n > 2*minSweep+live {
		t.Errorf("%d records kept for %d live ones", n, live)
	}
	for i := range live {
		if r, ok := s.recs[dedupe.Ref{Group: "g", Key: fmt.Sprint("live", i)}]; !ok || r.done {
			t.Fatalf("live record %d swept", i)
		}
	}
}
