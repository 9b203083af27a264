package dedupe_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/testkit"
)

// lateLog collects what a deferral reports.
type lateLog struct {
	mu  sync.Mutex
	got []string // "key:outcome"
}

func (l *lateLog) report(ref dedupe.Ref, r dedupe.Result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, fmt.Sprintf("%s:%v", ref.Key, r.Outcome))
}

func (l *lateLog) reports() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.got)
}

// newDeferredEnv is a group commit with deferred completions over a
// tripStore behind a fault store.
func newDeferredEnv() (gcEnv, *testkit.FaultStore, *lateLog) {
	s := newTripStore()
	fs := testkit.NewFaultStore(s)
	log := &lateLog{}
	return gcEnv{s, dedupe.WithDeferredCompletions(fs, log.report, 5*time.Second)}, fs, log
}

// TestGroupCommitDeferred checks that a deferred completion answers before
// its round trip, that those made while one is in flight go together in
// the next, and that Flush waits for both.
func TestGroupCommitDeferred(t *testing.T) {
	e, _, log := newDeferredEnv()
	ctx := t.Context()
	tks := make([]dedupe.Ticket, 3)
	for i := range tks {
		tks[i] = holdKey(t, e.g, gcRef(fmt.Sprint("k", i)), "", time.Hour)
	}
	e.s.hold()
	// Answered with its round trip held.
	if err := testkit.Complete(ctx, e.g, tks[0], time.Hour); err != nil {
		t.Fatalf("Complete(k0) = %v", err)
	}
	first := e.s.wait(t)
	for _, tk := range tks[1:] {
		if err := testkit.Complete(ctx, e.g, tk, time.Hour); err != nil {
			t.Fatalf("Complete(%s) = %v", tk.Key, err)
		}
	}
	flushed := gcAsync(func() {
		if err := dedupe.GroupCommitFlush(ctx, e.g); err != nil {
			t.Errorf("flush = %v", err)
		}
	})
	first.open()
	second := e.s.wait(t)
	select {
	case <-flushed:
		t.Fatal("flush returned with a round trip in flight")
	default:
	}
	second.open()
	<-flushed
	e.s.unhold()
	want := []string{"Complete:[k0]@1h0m0s", "Complete:[k1 k2]@1h0m0s"}
	if got := e.s.log()[3:]; !slices.Equal(got, want) {
		t.Errorf("round trips %q, want %q", got, want)
	}
	for _, tk := range tks {
		if got := statusOf(t, e.g, tk.Ref); got != dedupe.Suppressed {
			t.Errorf("%s after flush = %v, want suppressed", tk.Key, got)
		}
	}
	if got := log.reports(); len(got) != 0 {
		t.Errorf("reported %q, want nothing", got)
	}
}

// TestGroupCommitDeferredFailures checks that a deferred completion that
// fails is reported once, with the outcome Do would have answered, after a
// retry when the whole round trip failed.
func TestGroupCommitDeferredFailures(t *testing.T) {
	tests := []struct {
		name  string
		fault testkit.Fault
		stale bool // the ticket's token does not own the key
		want  []string
		trips int // completion round trips
		after dedupe.Outcome
	}{
		{name: "Recorded", trips: 1, after: dedupe.Suppressed},
		// The first round trip is applied, its answer lost.
		{name: "RetriedOnce", fault: testkit.Fault{Ops: testkit.OpComplete, Nth: 1, After: true}, trips: 2, after: dedupe.Suppressed},
		{name: "StoreDown", fault: testkit.Fault{Ops: testkit.OpComplete}, want: []string{"k:unrecorded"}, after: dedupe.Busy},
		{name: "AnswersLost", fault: testkit.Fault{Ops: testkit.OpComplete, After: true}, want: []string{"k:unrecorded"}, trips: 2, after: dedupe.Suppressed},
		{name: "LeaseLost", stale: true, want: []string{"k:lease-lost"}, trips: 1, after: dedupe.Busy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, fs, log := newDeferredEnv()
			tk := holdKey(t, e.g, gcRef("k"), "", time.Hour)
			if tt.stale {
				tk.Token = "stale"
			}
			if tt.fault.Ops != 0 {
				fs.Inject(tt.fault)
			}
			if err := testkit.Complete(t.Context(), e.g, tk, time.Hour); err != nil {
				t.Fatalf("Complete = %v, want nil: deferred", err)
			}
			if err := dedupe.GroupCommitFlush(t.Context(), e.g); err != nil {
				t.Fatal(err)
			}
			fs.Heal()
			if got := log.reports(); !slices.Equal(got, tt.want) {
				t.Errorf("reported %q, want %q", got, tt.want)
			}
			trips := 0
			for _, tr := range e.s.log() {
				if tr == "Complete:[k]@1h0m0s" {
					trips++
				}
			}
			if trips != tt.trips {
				t.Errorf("%d completion round trips, want %d", trips, tt.trips)
			}
			if got := statusOf(t, e.g, gcRef("k")); got != tt.after {
				t.Errorf("k afterwards = %v, want %v", got, tt.after)
			}
		})
	}
}

// TestGroupCommitDeferredClaimWaits checks that a claim of a key whose
// completion is deferred is sent only once that completion is recorded,
// so that it finds the key done and not busy under its own process's
// lease; and that a claim of another key does not wait.
func TestGroupCommitDeferredClaimWaits(t *testing.T) {
	e, _, _ := newDeferredEnv()
	ctx := t.Context()
	tk := holdKey(t, e.g, gcRef("k"), "", time.Hour)
	e.s.hold()
	if err := testkit.Complete(ctx, e.g, tk, time.Hour); err != nil {
		t.Fatal(err)
	}
	completion := e.s.wait(t)
	other := gcAsync(func() {
		if r, err := testkit.Claim(ctx, e.g, gcClaim("other"), time.Hour); err != nil || r.Outcome != dedupe.Acquired {
			t.Errorf("claim of another key = %v, %v; want acquired", r.Outcome, err)
		}
	})
	e.s.let(t) // the other key's claim, sent with the completion in flight
	<-other
	var again dedupe.ClaimResult
	claimed := gcAsync(func() {
		var err error
		if again, err = testkit.Claim(ctx, e.g, gcClaim("k"), time.Hour); err != nil {
			t.Errorf("claim again = %v", err)
		}
	})
	// Not sent while the completion is in flight: a claim would be the
	// next round trip held.
	select {
	case h := <-e.s.started:
		t.Fatalf("round trip %v sent before the completion landed", h.tripEntry)
	case <-time.After(50 * time.Millisecond):
	}
	completion.open()
	e.s.let(t)
	<-claimed
	if again.Outcome != dedupe.Suppressed {
		t.Errorf("claim again = %v, want suppressed", again.Outcome)
	}
	// A claim whose context ends while it waits returns its cause.
	e.s.unhold()
	tk2 := holdKey(t, e.g, gcRef("k2"), "", time.Hour)
	e.s.hold()
	if err := testkit.Complete(ctx, e.g, tk2, time.Hour); err != nil {
		t.Fatal(err)
	}
	held := e.s.wait(t)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := testkit.Claim(cctx, e.g, gcClaim("k2"), time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("claim with its context ended = %v, want context.Canceled", err)
	}
	if err := dedupe.GroupCommitFlush(cctx, e.g); !errors.Is(err, context.Canceled) {
		t.Errorf("flush with its context ended = %v, want context.Canceled", err)
	}
	held.open()
	e.s.unhold()
	if err := dedupe.GroupCommitFlush(ctx, e.g); err != nil {
		t.Fatal(err)
	}
}

// TestGroupCommitDeferredBound checks that once MaxDeferred completions
// are deferred, the next waits for its own round trip.
func TestGroupCommitDeferredBound(t *testing.T) {
	e, _, _ := newDeferredEnv()
	ctx := t.Context()
	tks := make([]dedupe.Ticket, dedupe.MaxDeferred+1)
	for i := range tks {
		tks[i] = holdKey(t, e.g, gcRef(fmt.Sprint("k", i)), "", time.Hour)
	}
	e.s.hold()
	for _, tk := range tks[:dedupe.MaxDeferred] {
		if err := testkit.Complete(ctx, e.g, tk, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	first := e.s.wait(t) // k0, the rest queued
	last := gcAsync(func() {
		if err := testkit.Complete(ctx, e.g, tks[dedupe.MaxDeferred], time.Hour); err != nil {
			t.Errorf("complete beyond the bound = %v", err)
		}
	})
	beyond := e.s.wait(t) // sent at once, in the completion lane
	if want := fmt.Sprintf("Complete:[k%d]@1h0m0s", dedupe.MaxDeferred); beyond.String() != want {
		t.Errorf("round trip %v, want %s", beyond.tripEntry, want)
	}
	select {
	case <-last:
		t.Fatal("a completion beyond the bound answered before its round trip")
	case <-time.After(20 * time.Millisecond):
	}
	beyond.open()
	<-last
	// The rest, if the first round trip did not take them all, go
	// unheld.
	e.s.unhold()
	first.open()
	if err := dedupe.GroupCommitFlush(ctx, e.g); err != nil {
		t.Fatal(err)
	}
}

// TestGuardDeferredChurn has goroutines run duplicates of a few keys
// through one Guard that defers its completions: each key's handler runs
// once, and nothing is reported late.
func TestGuardDeferredChurn(t *testing.T) {
	log := &lateLog{}
	g := newGuard(t, newTripStore(), dedupe.GuardConfig{GroupCommit: true, LateFailure: log.report})
	const (
		goroutines = 8
		keys       = 20
		rounds     = 100
	)
	var (
		mu   sync.Mutex
		runs = map[string]int{}
		wg   sync.WaitGroup
	)
	for w := range goroutines {
		wg.Go(func() {
			for i := range rounds {
				k := fmt.Sprint("k", (w+i)%keys)
				for {
					r := g.Do(t.Context(), []dedupe.Item{gcClaim(k)}, func(context.Context, int) error {
						mu.Lock()
						defer mu.Unlock()
						runs[k]++
						return nil
					})[0]
					if r.Outcome != dedupe.Busy {
						if r.Outcome != dedupe.Completed && r.Outcome != dedupe.Suppressed {
							t.Errorf("%s: %v, %v", k, r.Outcome, r.Err)
						}
						break
					}
				}
			}
		})
	}
	wg.Wait()
	if err := g.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	for k := range keys {
		if n := runs[fmt.Sprint("k", k)]; n != 1 {
			t.Errorf("k%d ran %d times, want 1", k, n)
		}
	}
	if got := log.reports(); len(got) != 0 {
		t.Errorf("reported %q, want nothing", got)
	}
}

// rideStore is a tripStore that sends completions with a claim in one
// round trip.
type rideStore struct{ *tripStore }

var _ dedupe.CompleteClaimer = rideStore{}

func (s rideStore) CompleteClaim(ctx context.Context, ts []dedupe.Ticket, retention time.Duration, items []dedupe.Item, lease time.Duration) ([]error, error, []dedupe.ClaimResult, []error, error) {
	refs := ticketRefs(ts)
	for _, it := range items {
		refs = append(refs, it.Ref)
	}
	if err := s.trip(ctx, "CompleteClaim", retention, refs...); err != nil {
		return nil, err, nil, nil, err
	}
	done, doneErr := s.Store.Complete(ctx, ts, retention)
	res, errs, err := s.Store.Claim(ctx, items, lease)
	return done, doneErr, res, errs, err
}

// TestGroupCommitDeferredRides checks that on a CompleteClaimer deferred
// completions ride with the next claim, in one round trip, and go alone
// when no claim comes in time or a flush asks for them.
func TestGroupCommitDeferredRides(t *testing.T) {
	s := rideStore{newTripStore()}
	log := &lateLog{}
	g := dedupe.WithDeferredCompletions(s, log.report, 5*time.Second)
	ctx := t.Context()
	tks := make([]dedupe.Ticket, 3)
	for i := range tks {
		tks[i] = holdKey(t, g, gcRef(fmt.Sprint("k", i)), "", time.Hour)
	}
	// Two completions, then a claim: one round trip.
	for _, tk := range tks[:2] {
		if err := testkit.Complete(ctx, g, tk, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if r, err := testkit.Claim(ctx, g, gcClaim("next"), time.Hour); err != nil || r.Outcome != dedupe.Acquired {
		t.Fatalf("claim = %v, %v", r.Outcome, err)
	}
	// A completion with no claim after it goes alone, soon.
	if err := testkit.Complete(ctx, g, tks[2], time.Hour); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the lone completion sent", func() bool { return len(s.log()) == 5 })
	want := []string{"CompleteClaim:[k0 k1 next]@1h0m0s", "Complete:[k2]@1h0m0s"}
	if got := s.log()[3:]; !slices.Equal(got, want) {
		t.Errorf("round trips %q, want %q", got, want)
	}
	// A claim of a key whose completion is queued sends it first; a
	// flush sends at once.
	tk := holdKey(t, g, gcRef("again"), "", time.Hour)
	if err := testkit.Complete(ctx, g, tk, time.Hour); err != nil {
		t.Fatal(err)
	}
	if r, err := testkit.Claim(ctx, g, gcClaim("again"), time.Hour); err != nil || r.Outcome != dedupe.Suppressed {
		t.Errorf("claim of a key completed = %v, %v; want suppressed", r.Outcome, err)
	}
	tk = holdKey(t, g, gcRef("flushed"), "", time.Hour)
	if err := testkit.Complete(ctx, g, tk, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := dedupe.GroupCommitFlush(ctx, g); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"k0", "k1", "k2", "again", "flushed"} {
		if got := statusOf(t, g, gcRef(k)); got != dedupe.Suppressed {
			t.Errorf("%s = %v, want suppressed", k, got)
		}
	}
	if got := log.reports(); len(got) != 0 {
		t.Errorf("reported %q, want nothing", got)
	}
}
