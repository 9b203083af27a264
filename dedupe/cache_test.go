package dedupe_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/dedupetest"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
)

func TestDoneCacheConformance(t *testing.T) {
	dedupetest.RunConformanceTests(t, func(*testing.T) dedupe.Store {
		return dedupe.WithDoneCache(memdedupe.New(memdedupe.Config{}), 64)
	}, dedupetest.Features{KeepsTrace: true})
}

// cached returns a cache of size over a memory store seen through a fault
// store, which counts the calls that reach the store.
func cached(size int) (dedupe.Store, *testkit.FaultStore) {
	fs := testkit.NewFaultStore(memdedupe.New(memdedupe.Config{}))
	return dedupe.WithDoneCache(fs, size), fs
}

func keyRef(i int) dedupe.Ref { return dedupe.Ref{Group: "g", Key: fmt.Sprint("k", i)} }

// completeVia claims and completes r through s.
func completeVia(t *testing.T, s dedupe.Store, r dedupe.Ref, fp string, retention time.Duration) {
	t.Helper()
	res, err := testkit.Claim(t.Context(), s, dedupe.Item{Ref: r, Fingerprint: fp}, time.Hour)
	if err != nil || res.Outcome != dedupe.Acquired {
		t.Fatalf("Claim(%q) = %v, %v", r, res.Outcome, err)
	}
	if err := testkit.Complete(t.Context(), s, dedupe.Ticket{Ref: r, Token: res.Token}, retention); err != nil {
		t.Fatal(err)
	}
}

// claimVia claims r through s and checks the answer and how many claims
// reached the store.
func claimVia(t *testing.T, s dedupe.Store, fs *testkit.FaultStore, r dedupe.Ref, fp string, want dedupe.Outcome, wantCalls int) {
	t.Helper()
	before := fs.Calls(testkit.OpClaim)
	res, err := testkit.Claim(t.Context(), s, dedupe.Item{Ref: r, Fingerprint: fp}, time.Hour)
	if err != nil || res.Outcome != want {
		t.Fatalf("Claim(%q, %q) = %v, %v; want %v", r, fp, res.Outcome, err, want)
	}
	if want == dedupe.Suppressed && (res.Remaining <= 0 || res.Until.IsZero()) {
		t.Errorf("Claim(%q) = done for %v until %v, want a time left", r, res.Remaining, res.Until)
	}
	if got := fs.Calls(testkit.OpClaim) - before; got != wantCalls {
		t.Errorf("Claim(%q, %q) reached the store %d times, want %d", r, fp, got, wantCalls)
	}
}

func TestDoneCache(t *testing.T) {
	s, fs := cached(8)
	completeVia(t, s, ref, "", time.Hour)
	claimVia(t, s, fs, ref, "", dedupe.Suppressed, 0)

	// Answered from memory: even a store that is down is not asked.
	fs.Inject(testkit.Fault{})
	claimVia(t, s, fs, ref, "", dedupe.Suppressed, 0)
	fs.Heal()

	// A done context still fails.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := testkit.Claim(ctx, s, dedupe.Item{Ref: ref}, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Claim on a cancelled context = %v, want context.Canceled", err)
	}
	// So does a bad request for a cached key.
	if _, err := testkit.Claim(t.Context(), s, dedupe.Item{Ref: ref, Fingerprint: "\xff"}, time.Hour); !errors.Is(err, msgkey.ErrInvalid) {
		t.Errorf("Claim with a bad fingerprint = %v, want msgkey.ErrInvalid", err)
	}
}

// TestDoneCacheFingerprint checks that the cache answers a fingerprinted
// claim only after the store has said Done to that fingerprint.
func TestDoneCacheFingerprint(t *testing.T) {
	s, fs := cached(8)
	completeVia(t, s, ref, "a", time.Hour)
	claimVia(t, s, fs, ref, "b", dedupe.Reused, 1)
	claimVia(t, s, fs, ref, "b", dedupe.Reused, 1)
	claimVia(t, s, fs, ref, "a", dedupe.Suppressed, 1)
	claimVia(t, s, fs, ref, "a", dedupe.Suppressed, 0)
	claimVia(t, s, fs, ref, "", dedupe.Suppressed, 0)
	claimVia(t, s, fs, ref, "b", dedupe.Reused, 1)
}

func TestDoneCacheRetention(t *testing.T) {
	s, fs := cached(8)
	const retention = 100 * time.Millisecond
	completeVia(t, s, ref, "", retention)
	other := keyRef(1)
	completeVia(t, s, other, "", time.Hour)
	time.Sleep(2 * retention)
	claimVia(t, s, fs, ref, "", dedupe.Acquired, 1)
	claimVia(t, s, fs, other, "", dedupe.Suppressed, 0)
}

// TestDoneCacheLearns checks that Done answers from the store are cached
// for no longer than the store keeps the record.
func TestDoneCacheLearns(t *testing.T) {
	mem := memdedupe.New(memdedupe.Config{})
	const retention = 150 * time.Millisecond
	completeVia(t, mem, ref, "", retention)
	fs := testkit.NewFaultStore(mem)
	s := dedupe.WithDoneCache(fs, 8)
	claimVia(t, s, fs, ref, "", dedupe.Suppressed, 1)
	claimVia(t, s, fs, ref, "", dedupe.Suppressed, 0)
	time.Sleep(retention)
	claimVia(t, s, fs, ref, "", dedupe.Acquired, 1)
}

func TestDoneCacheEvicts(t *testing.T) {
	s, fs := cached(2)
	for i := range 3 {
		completeVia(t, s, keyRef(i), "", time.Hour)
	}
	claimVia(t, s, fs, keyRef(2), "", dedupe.Suppressed, 0)
	claimVia(t, s, fs, keyRef(1), "", dedupe.Suppressed, 0)
	claimVia(t, s, fs, keyRef(0), "", dedupe.Suppressed, 1) // evicted, now back
	claimVia(t, s, fs, keyRef(1), "", dedupe.Suppressed, 0)
	claimVia(t, s, fs, keyRef(2), "", dedupe.Suppressed, 1) // least recently used
}

// TestDoneCacheBatch claims cached and uncached keys in one call: the
// cache answers the first, and the store, in one call, the others, each
// answer in its item's place. (TestDoneCache checks a cached key alone.)
func TestDoneCacheBatch(t *testing.T) {
	s, fs := cached(8)
	reqs := make([]dedupe.Item, 4)
	for i := range reqs {
		reqs[i] = dedupe.Item{Ref: keyRef(i)}
		if i < 2 {
			completeVia(t, s, keyRef(i), "", time.Hour)
		}
	}
	before := fs.Calls(testkit.OpClaim)
	res, errs, err := s.Claim(t.Context(), reqs, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []dedupe.Outcome{dedupe.Suppressed, dedupe.Suppressed, dedupe.Acquired, dedupe.Acquired} {
		if res[i].Outcome != want || errs[i] != nil {
			t.Errorf("Claim item %d = %v, %v; want %v", i, res[i].Outcome, errs[i], want)
		}
	}
	if n := fs.Calls(testkit.OpClaim) - before; n != 1 {
		t.Errorf("Claim reached the store %d times, want once", n)
	}
}
