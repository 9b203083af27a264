package dedupe_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/dedupetest"
	"github.com/idemq/idemq/dedupe/memdedupe"
)

// sentinels are the errors whose presence Do and DoBatch must agree on.
var sentinels = []error{
	dedupe.ErrInvalidKey, dedupe.ErrLeaseLost, dedupe.ErrConflict, dedupe.ErrInFlight,
	dedupe.ErrUnrecorded, dedupe.ErrStoreUnavailable, dedupetest.ErrInjected, errHandler,
}

// TestDoBatchAsDo runs one message through Do and, on a fresh store, as a
// batch of one through DoBatch: both must answer alike, run the handler
// alike and leave the key alike. TestGuardDo checks what Do answers.
func TestDoBatchAsDo(t *testing.T) {
	tests := []struct {
		name    string
		cfg     dedupe.GuardConfig
		setup   func(t *testing.T, s dedupe.Store)
		fault   *dedupetest.Fault
		fp      string
		handler error
	}{
		{name: "Success"},
		{name: "HandlerError", handler: errHandler},
		{name: "HandlerErrorHidesUnrecorded", handler: fmt.Errorf("wrapped: %w", dedupe.ErrUnrecorded)},
		{name: "HandlerErrorHidesLeaseLost", handler: fmt.Errorf("wrapped: %w", dedupe.ErrLeaseLost)},
		{name: "Done", setup: func(t *testing.T, s dedupe.Store) { complete(t, s) }},
		{name: "InFlight", setup: func(t *testing.T, s dedupe.Store) { claim(t, s, "") }},
		{name: "Conflict", setup: func(t *testing.T, s dedupe.Store) { claim(t, s, "a") }, fp: "b"},
		{name: "StoreDownFailClosed", fault: &dedupetest.Fault{}},
		{name: "StoreDownFailOpen", cfg: dedupe.GuardConfig{FailOpen: true}, fault: &dedupetest.Fault{}, handler: errHandler},
		// Fail-open flattens a handler error too: it must not look like a
		// success.
		{name: "StoreDownFailOpenHidesLeaseLost", cfg: dedupe.GuardConfig{FailOpen: true}, fault: &dedupetest.Fault{},
			handler: fmt.Errorf("wrapped: %w", dedupe.ErrLeaseLost)},
		{name: "CompleteFails", fault: &dedupetest.Fault{Ops: dedupetest.OpComplete | dedupetest.OpCompleteBatch}},
		{name: "CompleteFailsOnceThenRetried", fault: &dedupetest.Fault{Ops: dedupetest.OpComplete | dedupetest.OpCompleteBatch, Nth: 1, After: true}},
		{name: "CompleteAnswerLost", fault: &dedupetest.Fault{Ops: dedupetest.OpComplete | dedupetest.OpCompleteBatch, After: true}},
		{name: "ReleaseFails", fault: &dedupetest.Fault{Ops: dedupetest.OpRelease | dedupetest.OpReleaseBatch}, handler: errHandler},
	}
	type result struct {
		out   dedupe.Outcome
		err   error
		ran   bool
		after dedupe.Status
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := func(batch bool) result {
				mem := memdedupe.New(memdedupe.Config{})
				fs := dedupetest.NewFaultStore(mem)
				if tt.setup != nil {
					tt.setup(t, mem)
				}
				if tt.fault != nil {
					fs.Inject(*tt.fault)
				}
				g := newGuard(t, fs, tt.cfg)
				var r result
				if batch {
					outs, errs := g.DoBatch(t.Context(), []dedupe.BatchItem{{Ref: ref, Fingerprint: tt.fp}}, func(context.Context, int) error {
						r.ran = true
						return tt.handler
					})
					r.out, r.err = outs[0], errs[0]
				} else {
					r.out, r.err = g.Do(t.Context(), ref, tt.fp, func(context.Context) error {
						r.ran = true
						return tt.handler
					})
				}
				r.after = status(t, mem, "")
				return r
			}
			do, batch := run(false), run(true)
			if batch.out != do.out || batch.ran != do.ran || batch.after != do.after {
				t.Errorf("DoBatch: %v, ran %v, then %v; Do: %v, ran %v, then %v", batch.out, batch.ran, batch.after, do.out, do.ran, do.after)
			}
			for _, s := range sentinels {
				if errors.Is(batch.err, s) != errors.Is(do.err, s) {
					t.Errorf("DoBatch error %v and Do error %v disagree on %v", batch.err, do.err, s)
				}
			}
			if tt.handler != nil && do.ran && (batch.err == nil || errors.Is(batch.err, dedupe.ErrUnrecorded) || errors.Is(batch.err, dedupe.ErrLeaseLost)) {
				t.Errorf("handler failed with %v but DoBatch answered %v", tt.handler, batch.err)
			}
		})
	}
}

func named(key string) dedupe.Ref { return dedupe.Ref{Namespace: "test", Group: "g", Key: key} }

// statusOf claims r in s for a moment and returns the answer, releasing
// what it acquired.
func statusOf(t *testing.T, s dedupe.Store, r dedupe.Ref) dedupe.Status {
	t.Helper()
	res, err := s.Claim(context.Background(), dedupe.ClaimRequest{Ref: r, Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status == dedupe.Acquired {
		if err := s.Release(context.Background(), dedupe.Ticket{Ref: r, Token: res.Token}); err != nil {
			t.Fatal(err)
		}
	}
	return res.Status
}

// TestDoBatchMixed runs one batch that holds every kind of item: each gets
// its own answer, the handler runs for the acquired ones in order, and the
// store sees one round trip per phase.
func TestDoBatchMixed(t *testing.T) {
	type item struct {
		key, fp string
		// setup prepares the key's record before the batch.
		setup   func(t *testing.T, s dedupe.Store, r dedupe.Ref)
		handler error
		wantOut dedupe.Outcome
		wantErr error
		// wantAfter is the key's state after the batch; zero skips the check.
		wantAfter dedupe.Status
	}
	hold := func(fp string) func(*testing.T, dedupe.Store, dedupe.Ref) {
		return func(t *testing.T, s dedupe.Store, r dedupe.Ref) {
			if _, err := s.Claim(context.Background(), dedupe.ClaimRequest{Ref: r, Lease: time.Hour, Fingerprint: fp}); err != nil {
				t.Fatal(err)
			}
		}
	}
	done := func(t *testing.T, s dedupe.Store, r dedupe.Ref) { completeVia(t, s, r, "", time.Hour) }
	items := []item{
		{key: "fresh", wantOut: dedupe.Ran, wantAfter: dedupe.Done},
		{key: "done", setup: done, wantOut: dedupe.Suppressed, wantAfter: dedupe.Done},
		{key: "busy", setup: hold(""), wantOut: dedupe.Deferred, wantErr: dedupe.ErrInFlight, wantAfter: dedupe.InFlight},
		{key: "fail", handler: errHandler, wantOut: dedupe.Ran, wantErr: errHandler, wantAfter: dedupe.Acquired},
		{key: "bad\n", wantOut: dedupe.Deferred, wantErr: dedupe.ErrInvalidKey},
		{key: "conflict", fp: "b", setup: hold("a"), wantOut: dedupe.Deferred, wantErr: dedupe.ErrConflict, wantAfter: dedupe.InFlight},
		// Repeats are answered from their first occurrence: once it is
		// done they are duplicates, otherwise they wait for a redelivery.
		{key: "fresh", wantOut: dedupe.Suppressed},
		{key: "fail", wantOut: dedupe.Deferred, wantErr: dedupe.ErrInFlight},
		{key: "busy", wantOut: dedupe.Deferred, wantErr: dedupe.ErrInFlight},
		{key: "conflict", fp: "b", wantOut: dedupe.Deferred, wantErr: dedupe.ErrConflict},
		// A repeat with another fingerprint is claimed as a message of
		// its own: the store answers that it conflicts (the fingerprints
		// being of one length).
		{key: "fresh", fp: "g", wantOut: dedupe.Deferred, wantErr: dedupe.ErrConflict},
		{key: "late", wantOut: dedupe.Ran, wantAfter: dedupe.Done},
	}
	mem := memdedupe.New(memdedupe.Config{})
	fs := dedupetest.NewFaultStore(mem)
	batch := make([]dedupe.BatchItem, len(items))
	for i, it := range items {
		batch[i] = dedupe.BatchItem{Ref: named(it.key), Fingerprint: it.fp}
		if it.setup != nil {
			it.setup(t, mem, batch[i].Ref)
		}
	}
	// "fresh" records a fingerprint, so that its repeat with another one
	// conflicts.
	batch[0].Fingerprint = "f"
	batch[6].Fingerprint = "f"

	var ran []int
	outs, errs := newGuard(t, fs, dedupe.GuardConfig{}).DoBatch(t.Context(), batch, func(_ context.Context, i int) error {
		ran = append(ran, i)
		return items[i].handler
	})
	for i, it := range items {
		if outs[i] != it.wantOut || (it.wantErr == nil) != (errs[i] == nil) || it.wantErr != nil && !errors.Is(errs[i], it.wantErr) {
			t.Errorf("item %d (%q): %v, %v; want %v, %v", i, it.key, outs[i], errs[i], it.wantOut, it.wantErr)
		}
		if it.wantAfter != 0 {
			if got := statusOf(t, mem, batch[i].Ref); got != it.wantAfter {
				t.Errorf("item %d (%q): after the batch, Claim = %v, want %v", i, it.key, got, it.wantAfter)
			}
		}
	}
	if want := []int{0, 3, 11}; !slices.Equal(ran, want) {
		t.Errorf("handler ran for items %v, want %v", ran, want)
	}
	for op, want := range map[dedupetest.Op]int{
		dedupetest.OpClaimBatch: 1, dedupetest.OpCompleteBatch: 1, dedupetest.OpReleaseBatch: 1,
		dedupetest.OpClaim | dedupetest.OpComplete | dedupetest.OpRelease: 0,
	} {
		if got := fs.Calls(op); got != want {
			t.Errorf("%v called %d times, want %d", op, got, want)
		}
	}
}

// TestDoBatchRoundTrips counts the store calls of batches whose messages
// all succeed, all fail, or all are duplicates.
func TestDoBatchRoundTrips(t *testing.T) {
	tests := []struct {
		name    string
		n       int
		handler error
		// again runs the batch a second time, when its keys are done.
		again    bool
		wantOut  dedupe.Outcome
		wantRuns int
		// calls wants the number of claim, complete and release batches.
		calls [3]int
	}{
		{name: "Succeed", n: 32, wantOut: dedupe.Ran, wantRuns: 32, calls: [3]int{1, 1, 0}},
		{name: "Fail", n: 32, handler: errHandler, wantOut: dedupe.Ran, wantRuns: 32, calls: [3]int{1, 0, 1}},
		{name: "Duplicates", n: 32, again: true, wantOut: dedupe.Suppressed, wantRuns: 32, calls: [3]int{2, 1, 0}},
		{name: "Empty", n: 0, calls: [3]int{0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := dedupetest.NewFaultStore(memdedupe.New(memdedupe.Config{}))
			g := newGuard(t, fs, dedupe.GuardConfig{})
			items := make([]dedupe.BatchItem, tt.n)
			for i := range items {
				items[i] = dedupe.BatchItem{Ref: keyRef(i)}
			}
			runs := 0
			fn := func(context.Context, int) error {
				runs++
				return tt.handler
			}
			outs, errs := g.DoBatch(t.Context(), items, fn)
			if tt.again {
				outs, errs = g.DoBatch(t.Context(), items, fn)
			}
			if len(outs) != tt.n || len(errs) != tt.n {
				t.Fatalf("DoBatch answered %d outcomes and %d errors for %d items", len(outs), len(errs), tt.n)
			}
			for i := range outs {
				if outs[i] != tt.wantOut || !errors.Is(errs[i], tt.handler) {
					t.Errorf("item %d: %v, %v; want %v, %v", i, outs[i], errs[i], tt.wantOut, tt.handler)
				}
			}
			if runs != tt.wantRuns {
				t.Errorf("handler ran %d times, want %d", runs, tt.wantRuns)
			}
			got := [3]int{fs.Calls(dedupetest.OpClaimBatch), fs.Calls(dedupetest.OpCompleteBatch), fs.Calls(dedupetest.OpReleaseBatch)}
			if got != tt.calls {
				t.Errorf("claim, complete, release batches: %v, want %v", got, tt.calls)
			}
			if n := fs.Calls(dedupetest.OpAll &^ (dedupetest.OpClaimBatch | dedupetest.OpCompleteBatch | dedupetest.OpReleaseBatch)); n != 0 {
				t.Errorf("%d single calls, want none", n)
			}
		})
	}
}

// TestDoBatchStoreFails fails the store at each phase of a batch of a
// succeeding, a failing and an invalid item, fail-closed and fail-open.
func TestDoBatchStoreFails(t *testing.T) {
	type want struct {
		out dedupe.Outcome
		err []error
	}
	tests := []struct {
		name     string
		failOpen bool
		fault    dedupetest.Fault
		// inHandler injects the fault while the first handler runs rather
		// than before the batch.
		inHandler bool
		want      [3]want
		wantRan   []int
		// wantAfter is the state of the succeeding and failing keys.
		wantAfter [2]dedupe.Status
	}{{
		name:  "ClaimFailsClosed",
		fault: dedupetest.Fault{Ops: dedupetest.OpClaimBatch},
		want: [3]want{
			{dedupe.Deferred, []error{dedupe.ErrStoreUnavailable, dedupetest.ErrInjected}},
			{dedupe.Deferred, []error{dedupe.ErrStoreUnavailable, dedupetest.ErrInjected}},
			{dedupe.Deferred, []error{dedupe.ErrInvalidKey}},
		},
		wantAfter: [2]dedupe.Status{dedupe.Acquired, dedupe.Acquired},
	}, {
		name:     "ClaimFailsOpen",
		failOpen: true,
		fault:    dedupetest.Fault{Ops: dedupetest.OpClaimBatch},
		want: [3]want{
			{dedupe.Unguarded, nil},
			{dedupe.Unguarded, []error{errHandler}},
			// Invalid keys never run, the store up or down.
			{dedupe.Deferred, []error{dedupe.ErrInvalidKey}},
		},
		wantRan:   []int{0, 1},
		wantAfter: [2]dedupe.Status{dedupe.Acquired, dedupe.Acquired},
	}, {
		name:      "ClaimAnswerLostFailsClosed",
		fault:     dedupetest.Fault{Ops: dedupetest.OpClaimBatch, After: true},
		want:      [3]want{{dedupe.Deferred, []error{dedupe.ErrStoreUnavailable}}, {dedupe.Deferred, []error{dedupe.ErrStoreUnavailable}}, {dedupe.Deferred, []error{dedupe.ErrInvalidKey}}},
		wantAfter: [2]dedupe.Status{dedupe.InFlight, dedupe.InFlight}, // until the leases end
	}, {
		name:      "DownWhileHandlersRunFailsClosed",
		fault:     dedupetest.Fault{},
		inHandler: true,
		want: [3]want{
			{dedupe.Ran, []error{dedupe.ErrUnrecorded, dedupetest.ErrInjected}},
			{dedupe.Ran, []error{errHandler}},
			{dedupe.Deferred, []error{dedupe.ErrInvalidKey}},
		},
		wantRan:   []int{0, 1},
		wantAfter: [2]dedupe.Status{dedupe.InFlight, dedupe.InFlight},
	}, {
		// FailOpen is about claims: a store lost after the claim does the
		// same as fail-closed.
		name:      "DownWhileHandlersRunFailsOpen",
		failOpen:  true,
		fault:     dedupetest.Fault{},
		inHandler: true,
		want: [3]want{
			{dedupe.Ran, []error{dedupe.ErrUnrecorded, dedupetest.ErrInjected}},
			{dedupe.Ran, []error{errHandler}},
			{dedupe.Deferred, []error{dedupe.ErrInvalidKey}},
		},
		wantRan:   []int{0, 1},
		wantAfter: [2]dedupe.Status{dedupe.InFlight, dedupe.InFlight},
	}, {
		name:  "CompleteFailsOnceThenRetried",
		fault: dedupetest.Fault{Ops: dedupetest.OpCompleteBatch, Nth: 1},
		want: [3]want{
			{dedupe.Ran, nil},
			{dedupe.Ran, []error{errHandler}},
			{dedupe.Deferred, []error{dedupe.ErrInvalidKey}},
		},
		wantRan:   []int{0, 1},
		wantAfter: [2]dedupe.Status{dedupe.Done, dedupe.Acquired},
	}, {
		name:  "ReleaseFails",
		fault: dedupetest.Fault{Ops: dedupetest.OpReleaseBatch},
		want: [3]want{
			{dedupe.Ran, nil},
			{dedupe.Ran, []error{errHandler}},
			{dedupe.Deferred, []error{dedupe.ErrInvalidKey}},
		},
		wantRan:   []int{0, 1},
		wantAfter: [2]dedupe.Status{dedupe.Done, dedupe.InFlight},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := memdedupe.New(memdedupe.Config{})
			fs := dedupetest.NewFaultStore(mem)
			if !tt.inHandler {
				fs.Inject(tt.fault)
			}
			items := []dedupe.BatchItem{{Ref: named("ok")}, {Ref: named("fail")}, {Ref: named("")}}
			var ran []int
			outs, errs := newGuard(t, fs, dedupe.GuardConfig{FailOpen: tt.failOpen}).DoBatch(t.Context(), items, func(_ context.Context, i int) error {
				ran = append(ran, i)
				if tt.inHandler && i == 0 {
					fs.Inject(tt.fault)
				}
				if i == 1 {
					return errHandler
				}
				return nil
			})
			for i, w := range tt.want {
				if outs[i] != w.out || (len(w.err) == 0) != (errs[i] == nil) {
					t.Errorf("item %d: %v, %v; want %v, %v", i, outs[i], errs[i], w.out, w.err)
				}
				for _, e := range w.err {
					if !errors.Is(errs[i], e) {
						t.Errorf("item %d: error %v, want %v", i, errs[i], e)
					}
				}
			}
			if !slices.Equal(ran, tt.wantRan) {
				t.Errorf("handler ran for items %v, want %v", ran, tt.wantRan)
			}
			fs.Heal()
			for i, want := range tt.wantAfter {
				if got := statusOf(t, mem, items[i].Ref); got != want {
					t.Errorf("item %d: after the batch, Claim = %v, want %v", i, got, want)
				}
			}
		})
	}
}

// TestDoBatchExtends runs a batch whose handlers take several leases in
// all: the items waiting for their turn and those waiting for the batch's
// completion keep their leases.
func TestDoBatchExtends(t *testing.T) {
	mem := memdedupe.New(memdedupe.Config{})
	fs := dedupetest.NewFaultStore(mem)
	// Six extensions per lease leave room for a slow, loaded machine.
	const lease = 300 * time.Millisecond
	g := newGuard(t, fs, dedupe.GuardConfig{Lease: lease, ExtendEvery: lease / 6})
	items := []dedupe.BatchItem{{Ref: named("a")}, {Ref: named("b")}, {Ref: named("c")}}
	outs, errs := g.DoBatch(t.Context(), items, func(ctx context.Context, i int) error {
		time.Sleep(2 * lease)
		for _, it := range items {
			if got := statusOf(t, mem, it.Ref); got != dedupe.InFlight {
				t.Errorf("while item %d runs, Claim(%s) = %v, want in flight", i, it.Ref.Key, got)
			}
		}
		return ctx.Err()
	})
	for i := range items {
		if outs[i] != dedupe.Ran || errs[i] != nil {
			t.Errorf("item %d: %v, %v; want ran", i, outs[i], errs[i])
		}
		if got := statusOf(t, mem, items[i].Ref); got != dedupe.Done {
			t.Errorf("item %d: after the batch, Claim = %v, want done", i, got)
		}
	}
	// 6 leases long, for 3 keys: at least once a lease, though six were due.
	if n := fs.Calls(dedupetest.OpExtend); n < 3*6 {
		t.Errorf("Extend called %d times, want at least %d", n, 3*6)
	}
}

// extendFails is a store that fails every Extend of key with err, and
// closes failed after the first.
type extendFails struct {
	dedupe.Store
	key    string
	err    error
	once   sync.Once
	failed chan struct{}
}

func newExtendFails(key string, err error) *extendFails {
	return &extendFails{Store: memdedupe.New(memdedupe.Config{}), key: key, err: err, failed: make(chan struct{})}
}

func (s *extendFails) Extend(ctx context.Context, t dedupe.Ticket, lease time.Duration) error {
	if t.Key != s.key {
		return s.Store.Extend(ctx, t, lease)
	}
	s.once.Do(func() { close(s.failed) })
	return s.err
}

// TestDoBatchLeaseLostBeforeTurn loses the lease of an item while an
// earlier one runs, the store refusing to extend it or failing to answer
// for a whole lease while it extends the others: the item does not run,
// and is retried rather than reported as a success.
func TestDoBatchLeaseLostBeforeTurn(t *testing.T) {
	const lease = 100 * time.Millisecond
	tests := []struct {
		name string
		err  error
		// wait is how long the first item runs after the first failed
		// extension: long enough for the second item's context to be
		// cancelled (at once when the store refuses; after the lease when
		// it fails).
		wait     time.Duration
		wantText string
	}{
		{"Refused", fmt.Errorf("test: %w", dedupe.ErrLeaseLost), lease, "lease lost"},
		{"NoAnswer", errors.New("test: timeout"), 3 * lease, "not extended"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newExtendFails("b", tt.err)
			g := newGuard(t, s, dedupe.GuardConfig{Lease: lease, ExtendEvery: lease / 10})
			items := []dedupe.BatchItem{{Ref: named("a")}, {Ref: named("b")}, {Ref: named("c")}}
			var ran []int
			outs, errs := g.DoBatch(t.Context(), items, func(ctx context.Context, i int) error {
				ran = append(ran, i)
				if i == 0 {
					select {
					case <-s.failed:
					case <-time.After(5 * time.Second):
						t.Error("the lease of item 1 was never extended")
					}
					time.Sleep(tt.wait)
				}
				return ctx.Err()
			})
			if !slices.Equal(ran, []int{0, 2}) {
				t.Errorf("handler ran for items %v, want [0 2]", ran)
			}
			if outs[1] != dedupe.Deferred || !errors.Is(errs[1], dedupe.ErrInFlight) || errors.Is(errs[1], dedupe.ErrLeaseLost) ||
				!strings.Contains(fmt.Sprint(errs[1]), tt.wantText) {
				t.Errorf("item 1: %v, %v; want deferred with ErrInFlight, saying %q, without ErrLeaseLost", outs[1], errs[1], tt.wantText)
			}
			// The others' leases held, for their extensions succeeded.
			for _, i := range []int{0, 2} {
				if outs[i] != dedupe.Ran || errs[i] != nil {
					t.Errorf("item %d: %v, %v; want ran", i, outs[i], errs[i])
				}
			}
		})
	}
}

// TestDoBatchCallerCancelled cancels the caller's context while the first
// item runs: the later items do not run, and every claim is settled.
func TestDoBatchCallerCancelled(t *testing.T) {
	mem := memdedupe.New(memdedupe.Config{})
	g := newGuard(t, mem, dedupe.GuardConfig{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	items := []dedupe.BatchItem{{Ref: named("a")}, {Ref: named("b")}}
	var ran []int
	outs, errs := g.DoBatch(ctx, items, func(ctx context.Context, i int) error {
		ran = append(ran, i)
		cancel()
		return nil // finished before it noticed
	})
	if !slices.Equal(ran, []int{0}) {
		t.Errorf("handler ran for items %v, want [0]", ran)
	}
	if outs[0] != dedupe.Ran || errs[0] != nil {
		t.Errorf("item 0: %v, %v; want ran", outs[0], errs[0])
	}
	if outs[1] != dedupe.Deferred || !errors.Is(errs[1], context.Canceled) {
		t.Errorf("item 1: %v, %v; want deferred with context.Canceled", outs[1], errs[1])
	}
	for i, want := range []dedupe.Status{dedupe.Done, dedupe.Acquired} {
		if got := statusOf(t, mem, items[i].Ref); got != want {
			t.Errorf("item %d: after the batch, Claim = %v, want %v", i, got, want)
		}
	}
}

// TestDoBatchPanic lets a handler panic: the panic reaches the caller and
// no lease-keeping goroutine outlives DoBatch.
func TestDoBatchPanic(t *testing.T) {
	g := newGuard(t, memdedupe.New(memdedupe.Config{}), dedupe.GuardConfig{})
	items := []dedupe.BatchItem{{Ref: named("a")}, {Ref: named("b")}}
	func() {
		defer func() {
			if v := recover(); v != "boom" {
				t.Errorf("recovered %v, want the handler's panic", v)
			}
		}()
		g.DoBatch(t.Context(), items, func(context.Context, int) error { panic("boom") })
	}()
	goleak.VerifyNone(t)
}

// TestDoBatchClaimInContext checks that each item's fn sees its own claim,
// as in Do: the item that records its key in its transaction is not
// completed again, and an unguarded run sees no claim, not even an outer
// Guard's.
func TestDoBatchClaimInContext(t *testing.T) {
	s := newTxStore()
	// The Guard's own completion fails, so the item recorded in its
	// transaction is told apart from those completed by the Guard.
	s.Inject(dedupetest.Fault{Ops: dedupetest.OpCompleteBatch})
	items := []dedupe.BatchItem{{Ref: named("a")}, {Ref: named("b")}}
	var seen []dedupe.Ref
	outs, errs := newGuard(t, s, dedupe.GuardConfig{}).DoBatch(t.Context(), items, func(ctx context.Context, i int) error {
		tk, ok := dedupe.TicketFromContext(ctx)
		if !ok {
			return errors.New("no ticket")
		}
		seen = append(seen, tk.Ref)
		if i == 1 {
			return dedupe.CompleteTx(ctx, nil, s)
		}
		return nil
	})
	if !slices.Equal(seen, []dedupe.Ref{items[0].Ref, items[1].Ref}) {
		t.Errorf("handlers saw tickets for %v, want %v", seen, items)
	}
	if outs[0] != dedupe.Ran || !errors.Is(errs[0], dedupe.ErrUnrecorded) {
		t.Errorf("item 0: %v, %v; want ran and unrecorded", outs[0], errs[0])
	}
	if outs[1] != dedupe.Ran || errs[1] != nil || s.txCalls != 1 {
		t.Errorf("item 1: %v, %v, %d records in transactions; want ran and recorded once", outs[1], errs[1], s.txCalls)
	}

	down := dedupetest.NewFaultStore(memdedupe.New(memdedupe.Config{}))
	down.Inject(dedupetest.Fault{Ops: dedupetest.OpClaimBatch})
	inner := newGuard(t, down, dedupe.GuardConfig{FailOpen: true})
	outer := newGuard(t, memdedupe.New(memdedupe.Config{}), dedupe.GuardConfig{})
	var ok bool
	if _, err := outer.Do(t.Context(), named("outer"), "", func(ctx context.Context) error {
		outs, _ := inner.DoBatch(ctx, items[:1], func(ctx context.Context, _ int) error {
			_, ok = dedupe.TicketFromContext(ctx)
			return nil
		})
		if outs[0] != dedupe.Unguarded {
			return fmt.Errorf("inner DoBatch = %v, want unguarded", outs[0])
		}
		return nil
	}); err != nil || ok {
		t.Errorf("unguarded: TicketFromContext ok = %v; Do = %v", ok, err)
	}
}
