package dedupe_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
)

// sizes are the batch sizes that the tests of behaviour shared by single
// messages and batches run: one message, and a batch.
var sizes = []int{1, 3}

func refOf(key string) dedupe.Ref { return dedupe.Ref{Namespace: "test", Group: "g", Key: key} }

// keysOf returns n keys: k0, k1, ...
func keysOf(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
	}
	return keys
}

// itemsOf returns an item per key, each with fingerprint fp.
func itemsOf(fp string, keys ...string) []dedupe.Item {
	items := make([]dedupe.Item, len(keys))
	for i, k := range keys {
		items[i] = dedupe.Item{Ref: refOf(k), Fingerprint: fp}
	}
	return items
}

// statusOf claims r in s for a moment and returns the answer, releasing what
// it acquired.
func statusOf(t *testing.T, s dedupe.Store, r dedupe.Ref) dedupe.Outcome {
	t.Helper()
	res, err := testkit.Claim(context.Background(), s, dedupe.Item{Ref: r}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome == dedupe.Acquired {
		if err := testkit.Release(context.Background(), s, dedupe.Ticket{Ref: r, Token: res.Token}); err != nil {
			t.Fatal(err)
		}
	}
	return res.Outcome
}

// wantStatus fails unless a claim of r in s answers want: the state a Do
// left r in.
func wantStatus(t *testing.T, s dedupe.Store, r dedupe.Ref, want dedupe.Outcome) {
	t.Helper()
	if got := statusOf(t, s, r); got != want {
		t.Errorf("after Do, Claim(%q) = %v, want %v", r, got, want)
	}
}

// holdKey claims r in s for lease as another consumer would.
func holdKey(t *testing.T, s dedupe.Store, r dedupe.Ref, fp string, lease time.Duration) dedupe.Ticket {
	t.Helper()
	res, err := testkit.Claim(context.Background(), s, dedupe.Item{Ref: r, Fingerprint: fp}, lease)
	if err != nil || res.Outcome != dedupe.Acquired {
		t.Fatalf("Claim(%s) = %v, %v; want acquired", r, res.Outcome, err)
	}
	return dedupe.Ticket{Ref: r, Token: res.Token}
}

// guardEnv is a memory store on a step clock, which a Guard sees through a
// fault store.
type guardEnv struct {
	clock *testkit.Clock
	mem   *memdedupe.Store
	fs    *testkit.FaultStore
}

func newGuardEnv() *guardEnv {
	clock := testkit.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 0)
	mem := memdedupe.New(memdedupe.Config{Now: clock.Now})
	return &guardEnv{clock: clock, mem: mem, fs: testkit.NewFaultStore(mem)}
}

// checkResult reports got unless it has outcome want and an Err matching
// every one of wantErr (none: a nil Err).
func checkResult(t *testing.T, what string, got dedupe.Result, want dedupe.Outcome, wantErr ...error) {
	t.Helper()
	if got.Outcome != want || (len(wantErr) == 0) != (got.Err == nil) {
		t.Errorf("%s: %v, %v; want %v, %v", what, got.Outcome, got.Err, want, wantErr)
		return
	}
	for _, w := range wantErr {
		if !errors.Is(got.Err, w) {
			t.Errorf("%s: %v, %v; want an error matching %v", what, got.Outcome, got.Err, w)
		}
	}
}

// errSentinels is a handler's error that wraps every sentinel of the store
// contract: the handler failed, whatever its error wraps.
var errSentinels = fmt.Errorf("handler: %w", errors.Join(errHandler,
	dedupe.ErrLeaseLost, dedupe.ErrBusy, msgkey.ErrInvalid))

// TestGuardDo runs n messages in one situation, alone and as a batch: each
// gets the situation's outcome, the handler runs or not, the key is left as
// it should be, and the store sees one round trip per phase.
func TestGuardDo(t *testing.T) {
	// held is how long another consumer holds a key, or how long a done key
	// is kept, in setups.
	const held = time.Hour
	type env = guardEnv
	hold := func(fp string) func(*testing.T, *env, dedupe.Ref, int) {
		return func(t *testing.T, e *env, r dedupe.Ref, i int) {
			// Each key for another time, so that each Wait is told apart.
			holdKey(t, e.mem, r, fp, time.Duration(i+1)*held)
		}
	}
	done := func(fp string) func(*testing.T, *env, dedupe.Ref, int) {
		return func(t *testing.T, e *env, r dedupe.Ref, _ int) { completeVia(t, e.mem, r, fp, held) }
	}
	// endLease runs the store's clock past the guard's lease (30s by
	// default) without the keeper noticing: its ticks are 10s apart.
	endLease := func(t *testing.T, e *env, r dedupe.Ref) { e.clock.Add(time.Minute) }
	takeOver := func(t *testing.T, e *env, r dedupe.Ref) {
		endLease(t, e, r)
		holdKey(t, e.mem, r, "", held)
	}
	tests := []struct {
		name string
		cfg  dedupe.GuardConfig
		// key names item i; nil: k0, k1, ...
		key func(i int) string
		fp  string
		// setup prepares the record of item i before Do; fault is
		// injected after it.
		setup func(t *testing.T, e *env, r dedupe.Ref, i int)
		fault *testkit.Fault
		// during runs in each handler before it returns handler.
		during  func(t *testing.T, e *env, r dedupe.Ref)
		handler error

		want    dedupe.Outcome
		wantErr []error // each matches Result.Err; none: Err is nil
		// wantWait is the Wait of item i; nil: zero.
		wantWait func(i int) time.Duration
		wantRan  bool
		// wantAfter is the key's state after Do; zero skips the check.
		wantAfter dedupe.Outcome
		// trips counts claim, complete and release round trips.
		trips [3]int
	}{{
		name: "Success",
		want: dedupe.Completed, wantRan: true, wantAfter: dedupe.Suppressed, trips: [3]int{1, 1, 0},
	}, {
		name:    "HandlerError",
		handler: errHandler,
		want:    dedupe.Failed, wantErr: []error{errHandler}, wantRan: true,
		wantAfter: dedupe.Acquired, // released: the redelivery runs at once
		trips:     [3]int{1, 0, 1},
	}, {
		// Whatever sentinel a handler's error wraps, it failed.
		name:    "HandlerErrorWrapsSentinels",
		handler: errSentinels,
		want:    dedupe.Failed, wantErr: []error{errSentinels}, wantRan: true,
		wantAfter: dedupe.Acquired, trips: [3]int{1, 0, 1},
	}, {
		name:  "Done",
		setup: done(""),
		want:  dedupe.Suppressed, wantAfter: dedupe.Suppressed, trips: [3]int{1, 0, 0},
	}, {
		name:     "InFlight",
		setup:    hold(""),
		want:     dedupe.Busy,
		wantWait: func(i int) time.Duration { return time.Duration(i+1) * held },
		// The holder's claim is untouched.
		wantAfter: dedupe.Busy, trips: [3]int{1, 0, 0},
	}, {
		name:  "ReusedInFlight",
		setup: hold("aaaa"), fp: "bbbb",
		want: dedupe.Reused, wantAfter: dedupe.Busy, trips: [3]int{1, 0, 0},
	}, {
		// Invalid keys never run, and never reach the store, even when the
		// store is down and the guard fails open.
		name:  "InvalidKey",
		key:   func(i int) string { return fmt.Sprint("bad\n", i) },
		cfg:   dedupe.GuardConfig{FailOpen: true},
		fault: &testkit.Fault{},
		want:  dedupe.InvalidKey, wantErr: []error{msgkey.ErrInvalid},
	}, {
		name: "BadFingerprint",
		fp:   "ff\x00ff",
		want: dedupe.InvalidKey, wantErr: []error{msgkey.ErrInvalid},
	}, {
		// Fail-open runs the handler unguarded: its error, whatever it
		// wraps, is a failure too.
		name:    "StoreDownFailOpenHandlerErrorWrapsSentinels",
		cfg:     dedupe.GuardConfig{FailOpen: true},
		fault:   &testkit.Fault{},
		handler: errSentinels,
		want:    dedupe.Failed, wantErr: []error{errSentinels}, wantRan: true,
		wantAfter: dedupe.Acquired, trips: [3]int{1, 0, 0},
	}, {
		// Complete is applied but its answer lost; the retry, with the
		// same token, succeeds.
		name:  "CompleteAnswerLostOnceThenRetried",
		fault: &testkit.Fault{Ops: testkit.OpComplete, Nth: 1, After: true},
		want:  dedupe.Completed, wantRan: true, wantAfter: dedupe.Suppressed, trips: [3]int{1, 2, 0},
	}, {
		// Every answer is lost: the guard cannot know what the store
		// knows.
		name:  "CompleteAnswerLost",
		fault: &testkit.Fault{Ops: testkit.OpComplete, After: true},
		want:  dedupe.Unrecorded, wantErr: []error{testkit.ErrInjected}, wantRan: true,
		wantAfter: dedupe.Suppressed, trips: [3]int{1, 2, 0},
	}, {
		// The lease ended by the store's clock while the handler ran, and
		// nobody took the key: the effect may still have doubled. Complete
		// is not retried.
		name:   "LeaseEnded",
		during: endLease,
		want:   dedupe.LeaseLost, wantErr: []error{dedupe.ErrLeaseLost}, wantRan: true,
		wantAfter: dedupe.Acquired, trips: [3]int{1, 1, 0},
	}, {
		name:   "TakenOver",
		during: takeOver,
		want:   dedupe.LeaseLost, wantErr: []error{dedupe.ErrLeaseLost}, wantRan: true,
		// The new owner's claim is untouched.
		wantAfter: dedupe.Busy, trips: [3]int{1, 1, 0},
	}, {
		name:    "TakenOverHandlerError",
		during:  takeOver,
		handler: errHandler,
		want:    dedupe.Failed, wantErr: []error{errHandler}, wantRan: true,
		wantAfter: dedupe.Busy, trips: [3]int{1, 0, 1},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, n := range sizes {
				t.Run(fmt.Sprint("Size", n), func(t *testing.T) {
					e := newGuardEnv()
					items := make([]dedupe.Item, n)
					for i := range items {
						key := fmt.Sprint("k", i)
						if tt.key != nil {
							key = tt.key(i)
						}
						items[i] = dedupe.Item{Ref: refOf(key), Fingerprint: tt.fp}
						if tt.setup != nil {
							tt.setup(t, e, items[i].Ref, i)
						}
					}
					if tt.fault != nil {
						e.fs.Inject(*tt.fault)
					}
					ran := make([]int, n)
					res := newGuard(t, e.fs, tt.cfg).Do(t.Context(), items, func(_ context.Context, i int) error {
						ran[i]++
						if tt.during != nil {
							tt.during(t, e, items[i].Ref)
						}
						return tt.handler
					})
					if len(res) != n {
						t.Fatalf("Do answered %d results for %d items", len(res), n)
					}
					for i, r := range res {
						what := fmt.Sprint("item ", i)
						checkResult(t, what, r, tt.want, tt.wantErr...)
						var wantWait time.Duration
						if tt.wantWait != nil {
							wantWait = tt.wantWait(i)
						}
						if r.Wait != wantWait {
							t.Errorf("%s: Wait %v, want %v", what, r.Wait, wantWait)
						}
						if (ran[i] == 1) != tt.wantRan || ran[i] > 1 {
							t.Errorf("%s: handler ran %d times, want ran %v", what, ran[i], tt.wantRan)
						}
					}
					trips := [3]int{e.fs.Calls(testkit.OpClaim), e.fs.Calls(testkit.OpComplete), e.fs.Calls(testkit.OpRelease)}
					if trips != tt.trips {
						t.Errorf("claim, complete, release round trips: %v, want %v", trips, tt.trips)
					}
					if c := e.fs.Calls(testkit.OpExtend); c != 0 {
						t.Errorf("%d calls of Extend, want none", c)
					}
					if tt.wantAfter != 0 {
						for _, it := range items {
							wantStatus(t, e.mem, it.Ref, tt.wantAfter)
						}
					}
				})
			}
		})
	}
}

// TestGuardMixedBatch runs one batch that holds every kind of item: each
// gets its own answer, the handler runs for the acquired ones in order, and
// the store sees one round trip per phase.
func TestGuardMixedBatch(t *testing.T) {
	const held = time.Hour
	hold := func(fp string) func(*testing.T, dedupe.Store, dedupe.Ref) {
		return func(t *testing.T, s dedupe.Store, r dedupe.Ref) { holdKey(t, s, r, fp, held) }
	}
	done := func(t *testing.T, s dedupe.Store, r dedupe.Ref) { completeVia(t, s, r, "", held) }
	type item struct {
		key, fp string
		// setup prepares the key's record before the batch.
		setup    func(t *testing.T, s dedupe.Store, r dedupe.Ref)
		handler  error
		want     dedupe.Outcome
		wantErr  error // nil: whatever Err (checked by the other fields)
		wantWait time.Duration
		// wantAfter is the key's state after the batch; zero skips the
		// check.
		wantAfter dedupe.Outcome
	}
	items := []item{
		0: {key: "fresh", fp: "ffff", want: dedupe.Completed, wantAfter: dedupe.Suppressed},
		1: {key: "done", setup: done, want: dedupe.Suppressed, wantAfter: dedupe.Suppressed},
		2: {key: "busy", setup: hold(""), want: dedupe.Busy, wantWait: held, wantAfter: dedupe.Busy},
		3: {key: "fail", handler: errHandler, want: dedupe.Failed, wantErr: errHandler, wantAfter: dedupe.Acquired},
		4: {key: "bad\n", want: dedupe.InvalidKey, wantErr: msgkey.ErrInvalid},
		5: {key: "reused", fp: "bbbb", setup: hold("aaaa"), want: dedupe.Reused, wantAfter: dedupe.Busy},
		// Repeats (same key, same fingerprint) are not claimed: they
		// answer from the first (TestGuardRepeats, for every outcome). A
		// repeat with another fingerprint of the same kind is claimed as
		// a message of its own: the store answers that it conflicts with
		// the first's claim.
		6: {key: "fresh", fp: "gggg", want: dedupe.Reused},
		// One with no fingerprint is not compared: it finds the first's
		// claim in flight, for the guard's lease (30s by default; the
		// store's clock stands still).
		7: {key: "fresh", want: dedupe.Busy, wantWait: 30 * time.Second},
		8: {key: "late", want: dedupe.Completed, wantAfter: dedupe.Suppressed},
		9: {key: "bad\n", want: dedupe.InvalidKey, wantErr: msgkey.ErrInvalid},
	}
	e := newGuardEnv()
	batch := make([]dedupe.Item, len(items))
	for i, it := range items {
		batch[i] = dedupe.Item{Ref: refOf(it.key), Fingerprint: it.fp}
		if it.setup != nil {
			it.setup(t, e.mem, batch[i].Ref)
		}
	}
	var ran []int
	res := newGuard(t, e.fs, dedupe.GuardConfig{}).Do(t.Context(), batch, func(ctx context.Context, i int) error {
		ran = append(ran, i)
		if tk, ok := ticketOf(ctx); !ok || tk.Ref != batch[i].Ref {
			t.Errorf("item %d: ClaimFromContext = %v, %v; want its own", i, tk, ok)
		}
		return items[i].handler
	})
	for i, it := range items {
		r := res[i]
		if r.Outcome != it.want || r.Wait != it.wantWait || it.wantErr != nil && !errors.Is(r.Err, it.wantErr) {
			t.Errorf("item %d (%q %q): %v, %v, wait %v; want %v, %v, wait %v", i, it.key, it.fp, r.Outcome, r.Err, r.Wait, it.want, it.wantErr, it.wantWait)
		}
		if it.wantAfter != 0 {
			wantStatus(t, e.mem, batch[i].Ref, it.wantAfter)
		}
	}
	if want := []int{0, 3, 8}; !slices.Equal(ran, want) {
		t.Errorf("handler ran for items %v, want %v", ran, want)
	}
	for _, p := range []struct {
		ops  testkit.Op
		want int
	}{{testkit.OpClaim, 1}, {testkit.OpComplete, 1}, {testkit.OpRelease, 1}, {testkit.OpExtend, 0}} {
		if got := e.fs.Calls(p.ops); got != p.want {
			t.Errorf("%v called %d times, want %d", p.ops, got, p.want)
		}
	}
}

// TestGuardRepeats runs a batch in which a message comes twice (the same key
// and fingerprint) after another one: whatever happens to the first, the
// handler runs at most once, and the repeat answers from the first.
func TestGuardRepeats(t *testing.T) {
	errCause := errors.New("test: shutting down")
	tests := []struct {
		name  string
		cfg   dedupe.GuardConfig
		setup func(t *testing.T, e *guardEnv, r dedupe.Ref)
		fault *testkit.Fault
		// cancel: the other message's handler cancels Do's context.
		cancel bool
		// during runs in the first's handler before it returns handler.
		during  func(t *testing.T, e *guardEnv, r dedupe.Ref)
		handler error

		wantFirst   dedupe.Outcome
		wantFirstIs error
		wantRan     bool
		wantRepeat  dedupe.Outcome
		wantWait    time.Duration // of both
	}{
		{name: "Completed", wantFirst: dedupe.Completed, wantRan: true, wantRepeat: dedupe.Suppressed},
		{name: "Failed", handler: errHandler, wantFirst: dedupe.Failed, wantFirstIs: errHandler, wantRan: true, wantRepeat: dedupe.Busy},
		{name: "Unrecorded", fault: &testkit.Fault{Ops: testkit.OpComplete}, wantFirst: dedupe.Unrecorded, wantFirstIs: testkit.ErrInjected, wantRan: true, wantRepeat: dedupe.Suppressed},
		{name: "LeaseLost", during: func(t *testing.T, e *guardEnv, r dedupe.Ref) { e.clock.Add(time.Hour) },
			wantFirst: dedupe.LeaseLost, wantFirstIs: dedupe.ErrLeaseLost, wantRan: true, wantRepeat: dedupe.Suppressed},
		{name: "Unguarded", cfg: dedupe.GuardConfig{FailOpen: true}, fault: &testkit.Fault{Ops: testkit.OpClaim},
			wantFirst: dedupe.Unguarded, wantFirstIs: testkit.ErrInjected, wantRan: true, wantRepeat: dedupe.Suppressed},
		{name: "FailedUnguarded", cfg: dedupe.GuardConfig{FailOpen: true}, fault: &testkit.Fault{Ops: testkit.OpClaim}, handler: errHandler,
			wantFirst: dedupe.Failed, wantFirstIs: errHandler, wantRan: true, wantRepeat: dedupe.Busy},
		{name: "Suppressed", setup: func(t *testing.T, e *guardEnv, r dedupe.Ref) { completeVia(t, e.mem, r, "", time.Hour) },
			wantFirst: dedupe.Suppressed, wantRepeat: dedupe.Suppressed},
		{name: "Busy", setup: func(t *testing.T, e *guardEnv, r dedupe.Ref) { holdKey(t, e.mem, r, "", time.Hour) },
			wantFirst: dedupe.Busy, wantRepeat: dedupe.Busy, wantWait: time.Hour},
		{name: "Reused", setup: func(t *testing.T, e *guardEnv, r dedupe.Ref) { holdKey(t, e.mem, r, "aaaa", time.Hour) },
			wantFirst: dedupe.Reused, wantRepeat: dedupe.Reused},
		{name: "StoreDown", fault: &testkit.Fault{Ops: testkit.OpClaim},
			wantFirst: dedupe.StoreDown, wantFirstIs: testkit.ErrInjected, wantRepeat: dedupe.StoreDown},
		{name: "Canceled", cancel: true, wantFirst: dedupe.Canceled, wantFirstIs: errCause, wantRepeat: dedupe.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newGuardEnv()
			items := itemsOf("ffff", "other", "k", "k")
			if tt.setup != nil {
				tt.setup(t, e, items[1].Ref)
			}
			if tt.fault != nil {
				e.fs.Inject(*tt.fault)
			}
			ctx, cancel := context.WithCancelCause(t.Context())
			defer cancel(nil)
			ran := 0
			res := newGuard(t, e.fs, tt.cfg).Do(ctx, items, func(_ context.Context, i int) error {
				if i == 0 {
					if tt.cancel {
						cancel(errCause)
					}
					return nil
				}
				ran++
				if tt.during != nil {
					tt.during(t, e, items[i].Ref)
				}
				return tt.handler
			})
			first, repeat := res[1], res[2]
			if first.Outcome != tt.wantFirst || (tt.wantFirstIs == nil) != (first.Err == nil) ||
				tt.wantFirstIs != nil && !errors.Is(first.Err, tt.wantFirstIs) || first.Wait != tt.wantWait {
				t.Errorf("first: %v, %v, wait %v; want %v, %v, wait %v", first.Outcome, first.Err, first.Wait, tt.wantFirst, tt.wantFirstIs, tt.wantWait)
			}
			if repeat.Outcome != tt.wantRepeat || repeat.Wait != tt.wantWait {
				t.Errorf("repeat: %v, %v, wait %v; want %v, wait %v", repeat.Outcome, repeat.Err, repeat.Wait, tt.wantRepeat, tt.wantWait)
			}
			// A repeat that answers as the first says why alike.
			if repeat.Outcome == first.Outcome && repeat.Outcome != dedupe.Suppressed && !errors.Is(repeat.Err, first.Err) {
				t.Errorf("repeat: error %v, want the first's %v", repeat.Err, first.Err)
			}
			if (ran == 1) != tt.wantRan || ran > 1 {
				t.Errorf("handler of the repeated message ran %d times, want ran %v", ran, tt.wantRan)
			}
		})
	}
}

// TestGuardEmpty runs no items: no handler runs, and the store sees no
// call. (TestGuardDo counts the round trips of every situation, alone and
// as a batch, and TestGuardMixedBatch those of a batch of every kind.)
func TestGuardEmpty(t *testing.T) {
	e := newGuardEnv()
	res := newGuard(t, e.fs, dedupe.GuardConfig{}).Do(t.Context(), nil, func(context.Context, int) error {
		t.Error("handler ran")
		return nil
	})
	if len(res) != 0 || e.fs.Calls(testkit.OpAll) != 0 {
		t.Errorf("Do of no items = %v after %d store calls, want nothing", res, e.fs.Calls(testkit.OpAll))
	}
}

// TestGuardStoreFails fails the store at each phase of a batch of two
// succeeding items, a failing one and an invalid one, fail-closed and
// fail-open: each item's outcome, the handlers run, the keys left and the
// round trips. (TestGuardDo checks the faults it does not, on batches of
// one kind.)
func TestGuardStoreFails(t *testing.T) {
	type want struct {
		out dedupe.Outcome
		err []error
	}
	var (
		completed  = want{dedupe.Completed, nil}
		failed     = want{dedupe.Failed, []error{errHandler}}
		invalid    = want{dedupe.InvalidKey, []error{msgkey.ErrInvalid}}
		storeDown  = want{dedupe.StoreDown, []error{testkit.ErrInjected}}
		unguarded  = want{dedupe.Unguarded, []error{testkit.ErrInjected}}
		unrecorded = want{dedupe.Unrecorded, []error{testkit.ErrInjected}}
	)
	tests := []struct {
		name     string
		failOpen bool
		fault    testkit.Fault
		// inHandler injects the fault while the first handler runs rather
		// than before the batch.
		inHandler bool
		want      [4]want
		wantRan   []int
		// wantAfter is the state of the keys of items 0, 1 and 3.
		wantAfter [3]dedupe.Outcome
		// trips counts claim, complete and release round trips.
		trips [3]int
	}{{
		name:      "ClaimFailsClosed",
		fault:     testkit.Fault{Ops: testkit.OpClaim},
		want:      [4]want{storeDown, storeDown, invalid, storeDown},
		wantAfter: [3]dedupe.Outcome{dedupe.Acquired, dedupe.Acquired, dedupe.Acquired},
		trips:     [3]int{1, 0, 0},
	}, {
		name:     "ClaimFailsOpen",
		failOpen: true,
		fault:    testkit.Fault{Ops: testkit.OpClaim},
		// Invalid keys never run, the store up or down.
		want:      [4]want{unguarded, failed, invalid, unguarded},
		wantRan:   []int{0, 1, 3},
		wantAfter: [3]dedupe.Outcome{dedupe.Acquired, dedupe.Acquired, dedupe.Acquired},
		trips:     [3]int{1, 0, 0},
	}, {
		name:      "ClaimAnswerLostFailsClosed",
		fault:     testkit.Fault{Ops: testkit.OpClaim, After: true},
		want:      [4]want{storeDown, storeDown, invalid, storeDown},
		wantAfter: [3]dedupe.Outcome{dedupe.Busy, dedupe.Busy, dedupe.Busy}, // until the leases end
		trips:     [3]int{1, 0, 0},
	}, {
		name:      "ClaimAnswerLostFailsOpen",
		failOpen:  true,
		fault:     testkit.Fault{Ops: testkit.OpClaim, After: true},
		want:      [4]want{unguarded, failed, invalid, unguarded},
		wantRan:   []int{0, 1, 3},
		wantAfter: [3]dedupe.Outcome{dedupe.Busy, dedupe.Busy, dedupe.Busy},
		trips:     [3]int{1, 0, 0},
	}, {
		name:      "DownWhileHandlersRunFailsClosed",
		fault:     testkit.Fault{},
		inHandler: true,
		want:      [4]want{unrecorded, failed, invalid, unrecorded},
		wantRan:   []int{0, 1, 3},
		wantAfter: [3]dedupe.Outcome{dedupe.Busy, dedupe.Busy, dedupe.Busy},
		trips:     [3]int{1, 2, 1},
	}, {
		// FailOpen is about claims: a store lost after the claim does the
		// same as fail-closed.
		name:      "DownWhileHandlersRunFailsOpen",
		failOpen:  true,
		fault:     testkit.Fault{},
		inHandler: true,
		want:      [4]want{unrecorded, failed, invalid, unrecorded},
		wantRan:   []int{0, 1, 3},
		wantAfter: [3]dedupe.Outcome{dedupe.Busy, dedupe.Busy, dedupe.Busy},
		trips:     [3]int{1, 2, 1},
	}, {
		name:      "CompleteFailsOnceThenRetried",
		fault:     testkit.Fault{Ops: testkit.OpComplete, Nth: 1},
		want:      [4]want{completed, failed, invalid, completed},
		wantRan:   []int{0, 1, 3},
		wantAfter: [3]dedupe.Outcome{dedupe.Suppressed, dedupe.Acquired, dedupe.Suppressed},
		trips:     [3]int{1, 2, 1},
	}, {
		name:      "CompleteFails",
		fault:     testkit.Fault{Ops: testkit.OpComplete},
		want:      [4]want{unrecorded, failed, invalid, unrecorded},
		wantRan:   []int{0, 1, 3},
		wantAfter: [3]dedupe.Outcome{dedupe.Busy, dedupe.Acquired, dedupe.Busy},
		trips:     [3]int{1, 2, 1},
	}, {
		name:      "ReleaseFails",
		fault:     testkit.Fault{Ops: testkit.OpRelease},
		want:      [4]want{completed, failed, invalid, completed},
		wantRan:   []int{0, 1, 3},
		wantAfter: [3]dedupe.Outcome{dedupe.Suppressed, dedupe.Busy, dedupe.Suppressed},
		trips:     [3]int{1, 1, 1},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newGuardEnv()
			if !tt.inHandler {
				e.fs.Inject(tt.fault)
			}
			items := itemsOf("", "ok", "fail", "", "ok2")
			var ran []int
			res := newGuard(t, e.fs, dedupe.GuardConfig{FailOpen: tt.failOpen}).Do(t.Context(), items, func(_ context.Context, i int) error {
				ran = append(ran, i)
				if tt.inHandler && i == 0 {
					e.fs.Inject(tt.fault)
				}
				if i == 1 {
					return errHandler
				}
				return nil
			})
			for i, w := range tt.want {
				checkResult(t, fmt.Sprint("item ", i), res[i], w.out, w.err...)
			}
			// A failed release is detail: the handler's error is the one
			// that counts.
			if tt.want[1].out == dedupe.Failed && errors.Is(res[1].Err, testkit.ErrInjected) {
				t.Errorf("item 1: error %v, want the handler's alone", res[1].Err)
			}
			if !slices.Equal(ran, tt.wantRan) {
				t.Errorf("handler ran for items %v, want %v", ran, tt.wantRan)
			}
			if trips := [3]int{e.fs.Calls(testkit.OpClaim), e.fs.Calls(testkit.OpComplete), e.fs.Calls(testkit.OpRelease)}; trips != tt.trips {
				t.Errorf("claim, complete, release round trips: %v, want %v", trips, tt.trips)
			}
			for n, i := range []int{0, 1, 3} {
				if got := statusOf(t, e.mem, items[i].Ref); got != tt.wantAfter[n] {
					t.Errorf("item %d: after the batch, Claim = %v, want %v", i, got, tt.wantAfter[n])
				}
			}
		})
	}
}

// TestGuardConcurrent delivers the same messages to many consumers at once,
// in different orders: each handler runs once; the other consumers find the
// key busy, with a lease left to wait, or, once it is done, suppress it.
func TestGuardConcurrent(t *testing.T) {
	for _, n := range []int{1, 4} {
		t.Run(fmt.Sprint("Size", n), func(t *testing.T) {
			const lease = 30 * time.Second
			g := newGuard(t, memdedupe.New(memdedupe.Config{}), dedupe.GuardConfig{Lease: lease})
			items := itemsOf("", keysOf(n)...)
			runs := make([]atomic.Int32, n)
			var wg sync.WaitGroup
			for c := range 32 {
				wg.Go(func() {
					// Consumer c sees the batch rotated by c.
					order := append(slices.Clone(items[c%n:]), items[:c%n]...)
					key := func(i int) int { return (i + c) % n }
					res := g.Do(t.Context(), order, func(context.Context, int) error {
						return nil
					})
					for i, r := range res {
						switch {
						case r.Outcome == dedupe.Completed && r.Err == nil:
							runs[key(i)].Add(1)
						case r.Outcome == dedupe.Suppressed && r.Err == nil:
						case r.Outcome == dedupe.Busy && r.Wait > 0 && r.Wait <= lease:
						default:
							t.Errorf("consumer %d, item %d: %v, %v, wait %v", c, i, r.Outcome, r.Err, r.Wait)
						}
					}
				})
			}
			wg.Wait()
			for i := range runs {
				if r := runs[i].Load(); r != 1 {
					t.Errorf("key %d: handler ran %d times, want 1", i, r)
				}
			}
		})
	}
}

// TestGuardExtends runs handlers for several leases in all while another
// consumer keeps trying to take their keys: the keys whose handlers ran,
// those whose handlers wait for their turn and the running one keep their
// leases. The store's clock is a step clock that the handlers move on half
// a lease at a time, so that a machine too loaded to run the keeper's timer
// for a real lease cannot end a lease; the Guard's own lease is a minute,
// which no test waits out.
func TestGuardExtends(t *testing.T) {
	const (
		lease = time.Minute
		// Three leases in all, half a lease a step.
		steps = 6
	)
	for _, n := range sizes {
		for _, cancel := range []bool{false, true} {
			name := fmt.Sprint("Size", n)
			if cancel {
				// The caller's context ends as the last handler starts;
				// that handler carries on regardless, and its lease must
				// still hold.
				name += "CallerCanceled"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				e := newGuardEnv()
				g := newGuard(t, e.fs, dedupe.GuardConfig{Lease: lease, ExtendEvery: 5 * time.Millisecond})
				ctx, stop := context.WithCancel(t.Context())
				defer stop()
				items := itemsOf("", keysOf(n)...)
				res := g.Do(ctx, items, func(_ context.Context, i int) error {
					if cancel && i == n-1 {
						stop()
					}
					for range (i+1)*steps/n - i*steps/n {
						e.clock.Add(lease / 2)
						// Extensions are counted as they start, one key
						// after another: 2n more include a whole round
						// begun after the step.
						from := e.fs.Calls(testkit.OpExtend)
						for deadline := time.Now().Add(10 * time.Second); e.fs.Calls(testkit.OpExtend) < from+2*n; time.Sleep(time.Millisecond) {
							if time.Now().After(deadline) {
								t.Fatalf("while item %d runs, %d extensions in 10s, want %d", i, e.fs.Calls(testkit.OpExtend)-from, 2*n)
							}
						}
						for _, it := range items {
							wantStatus(t, e.mem, it.Ref, dedupe.Busy)
						}
					}
					return nil
				})
				for i, r := range res {
					checkResult(t, fmt.Sprint("item ", i), r, dedupe.Completed)
					wantStatus(t, e.mem, items[i].Ref, dedupe.Suppressed)
				}
				// Three leases long: at least once a lease for each key.
				if got := e.fs.Calls(testkit.OpExtend); got < 3*n {
					t.Errorf("Extend called %d times, want at least %d", got, 3*n)
				}
			})
		}
	}
}

// keysIndex returns 0, 1, ..., n-1.
func keysIndex(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// TestGuardCannotExtend fails every extension: once a whole lease has passed
// without one, the handler's context is cancelled, for the store may have
// handed the key to someone else, with the store's error as the reason
// once an extension was tried. How many are tried within the lease is the
// keeper's timer's, which a loaded machine delays: TestGuardRetriesExtend
// counts them where the lease cannot end.
func TestGuardCannotExtend(t *testing.T) {
	const lease = 100 * time.Millisecond
	for _, n := range sizes {
		for _, tt := range []struct {
			name  string
			stops bool
			want  dedupe.Outcome
		}{
			{"HandlerStops", true, dedupe.Failed},
			{"HandlerFinishes", false, dedupe.LeaseLost},
		} {
			t.Run(fmt.Sprint(tt.name, "/Size", n), func(t *testing.T) {
				mem := memdedupe.New(memdedupe.Config{})
				fs := testkit.NewFaultStore(mem)
				fs.Inject(testkit.Fault{Ops: testkit.OpExtend})
				ks, extends := countExtends(fs)
				g := newGuard(t, ks, dedupe.GuardConfig{Lease: lease, ExtendEvery: lease / 4})
				items := itemsOf("", keysOf(n)...)
				last := n - 1
				start := time.Now()
				var stopped time.Duration
				res := g.Do(t.Context(), items, func(ctx context.Context, i int) error {
					if i != last {
						return nil
					}
					select {
					case <-ctx.Done():
						stopped = time.Since(start)
					case <-time.After(5 * time.Second):
						t.Error("handler context not cancelled")
					}
					cause := context.Cause(ctx)
					if !errors.Is(cause, dedupe.ErrLeaseLost) {
						t.Errorf("handler context cause = %v, want ErrLeaseLost", cause)
					}
					// No extension starts once the lease is lost, and
					// none is under way when it is: every one counted
					// failed before.
					if tried := extends(items[i].Ref); tried > 0 && !errors.Is(cause, testkit.ErrInjected) {
						t.Errorf("handler context cause = %v after %d failed extensions, want the store's error", cause, tried)
					}
					// Past the end of the store's leases too.
					time.Sleep(lease / 2)
					if tt.stops {
						return cause
					}
					return nil
				})
				for i := range last {
					checkResult(t, fmt.Sprint("item ", i), res[i], dedupe.LeaseLost, dedupe.ErrLeaseLost)
				}
				checkResult(t, "last item", res[last], tt.want, dedupe.ErrLeaseLost)
				if stopped < lease {
					t.Errorf("handler cancelled after %v, before the lease of %v could have ended", stopped, lease)
				}
				for _, it := range items {
					wantStatus(t, mem, it.Ref, dedupe.Acquired)
				}
			})
		}
	}
}

// TestGuardRetriesExtend fails every extension of leases that cannot end
// while the test runs: the keeper tries again every ExtendEvery rather
// than giving a lease up after a failure, for every key, and the handlers'
// contexts stay live.
func TestGuardRetriesExtend(t *testing.T) {
	for _, n := range sizes {
		t.Run(fmt.Sprint("Size", n), func(t *testing.T) {
			fs := testkit.NewFaultStore(memdedupe.New(memdedupe.Config{}))
			fs.Inject(testkit.Fault{Ops: testkit.OpExtend})
			ks, extends := countExtends(fs)
			g := newGuard(t, ks, dedupe.GuardConfig{Lease: time.Hour, ExtendEvery: time.Millisecond})
			items := itemsOf("", keysOf(n)...)
			res := g.Do(t.Context(), items, func(ctx context.Context, i int) error {
				if i != n-1 {
					return nil
				}
				// Every lease is kept until the last handler returns.
				testkit.WaitFor(t, "three failed extensions of each key", func() bool {
					for _, it := range items {
						if extends(it.Ref) < 3 {
							return false
						}
					}
					return true
				})
				return context.Cause(ctx)
			})
			for i, r := range res {
				checkResult(t, fmt.Sprint("item ", i), r, dedupe.Completed)
			}
		})
	}
}

// countExtends wraps s in a store that counts, per key, the Extend calls
// that reach it, and returns the count of a key.
func countExtends(s dedupe.Store) (dedupe.Store, func(dedupe.Ref) int) {
	var mu sync.Mutex
	n := map[dedupe.Ref]int{}
	hs := &testkit.HookStore{Store: s, Hooks: testkit.StoreHooks{Extend: func(_ context.Context, t dedupe.Ticket) error {
		mu.Lock()
		defer mu.Unlock()
		n[t.Ref]++
		return nil
	}}}
	return hs, func(ref dedupe.Ref) int {
		mu.Lock()
		defer mu.Unlock()
		return n[ref]
	}
}

// shards keeps the records of one key in a store of its own and those of
// every other key in another, as a store sharded by key would: a test can
// then fail or take over that key alone in a batch.
type shards struct {
	key       string
	own, rest dedupe.Store
}

func (s shards) of(r dedupe.Ref) dedupe.Store {
	if r.Key == s.key {
		return s.own
	}
	return s.rest
}

// Claim asks each key's store for it alone: a batch of many keys makes
// many calls, as the test wants.
func (s shards) Claim(ctx context.Context, reqs []dedupe.Item, lease time.Duration) ([]dedupe.ClaimResult, []error, error) {
	res := make([]dedupe.ClaimResult, len(reqs))
	errs := make([]error, len(reqs))
	for i, r := range reqs {
		var err error
		if res[i], err = testkit.Claim(ctx, s.of(r.Ref), r, lease); err != nil && !errors.Is(err, msgkey.ErrInvalid) {
			return nil, nil, err
		}
		errs[i] = err
	}
	return res, errs, nil
}

func (s shards) Complete(ctx context.Context, ts []dedupe.Ticket, retention time.Duration) ([]error, error) {
	return s.each(ts, func(t dedupe.Ticket) error { return testkit.Complete(ctx, s.of(t.Ref), t, retention) })
}

func (s shards) Release(ctx context.Context, ts []dedupe.Ticket) ([]error, error) {
	return s.each(ts, func(t dedupe.Ticket) error { return testkit.Release(ctx, s.of(t.Ref), t) })
}

func (s shards) each(ts []dedupe.Ticket, f func(dedupe.Ticket) error) ([]error, error) {
	errs := make([]error, len(ts))
	for i, t := range ts {
		err := f(t)
		if err != nil && !errors.Is(err, msgkey.ErrInvalid) && !errors.Is(err, dedupe.ErrLeaseLost) {
			return nil, err
		}
		errs[i] = err
	}
	return errs, nil
}

func (s shards) Extend(ctx context.Context, t dedupe.Ticket, lease time.Duration) error {
	return s.of(t.Ref).Extend(ctx, t, lease)
}

// waitLost waits until the keeper has given up the lease of the key kept in
// lost while it goes on extending the keptKeys leases kept in kept: two
// rounds of extensions of those without one of that. Every round extends
// every live lease, and gives one up before it extends the next, so the
// lease was given up, and its context cancelled, by then.
func waitLost(t *testing.T, lost, kept *testkit.FaultStore, keptKeys int) {
	t.Helper()
	nl, nk := lost.Calls(testkit.OpExtend), kept.Calls(testkit.OpExtend)
	testkit.WaitFor(t, "the lease given up", func() bool {
		l, k := lost.Calls(testkit.OpExtend), kept.Calls(testkit.OpExtend)
		if l != nl {
			nl, nk = l, k
			return false
		}
		return k >= nk+2*keptKeys
	})
}

// TestGuardLeaseLostOneItem loses the lease of the middle item of a batch,
// the store refusing to extend it (another consumer took it over) or
// failing to answer for a whole lease, while the others' leases hold. Lost
// while an earlier item runs, it does not run, and is busy rather than a
// success; lost while it runs, its context is cancelled, and the store
// decides whether its effect was recorded.
func TestGuardLeaseLostOneItem(t *testing.T) {
	// The other items' leases must outlive every stall of this process
	// while one item's is lost: with 200ms, a machine at load 46 stalled
	// the keeper past a whole lease and the store ended another item's
	// lease too. (The keeper keeps real time; stepping it is left to do.)
	const lease = 2 * time.Second
	tests := []struct {
		name string
		// refuse: the store refuses to extend the lease (another consumer
		// took the key over); otherwise every extension fails.
		refuse bool
		// running: the lease is lost while the item's handler runs rather
		// than while the earlier item's does.
		running bool
		want    dedupe.Outcome
		wantErr []error
		// wantAfter is the key's state after Do.
		wantAfter dedupe.Outcome
	}{{
		name:   "RefusedBeforeTurn",
		refuse: true,
		want:   dedupe.Busy, wantErr: []error{dedupe.ErrLeaseLost},
		wantAfter: dedupe.Busy, // the new owner's
	}, {
		name: "NoAnswerBeforeTurn",
		want: dedupe.Busy, wantErr: []error{dedupe.ErrLeaseLost, testkit.ErrInjected},
		// Released: the store's lease had not ended by its clock.
		wantAfter: dedupe.Acquired,
	}, {
		name:   "RefusedWhileRunning",
		refuse: true, running: true,
		want: dedupe.LeaseLost, wantErr: []error{dedupe.ErrLeaseLost},
		wantAfter: dedupe.Busy,
	}, {
		// The keeper gave the lease up, but the store's had not ended by
		// its clock: the effect is recorded, and could not have doubled.
		name:    "NoAnswerWhileRunning",
		running: true,
		want:    dedupe.Completed, wantAfter: dedupe.Suppressed,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rest := testkit.NewFaultStore(memdedupe.New(memdedupe.Config{}))
			clock := testkit.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 0)
			memB := memdedupe.New(memdedupe.Config{Now: clock.Now})
			own := testkit.NewFaultStore(memB)
			if !tt.refuse {
				own.Inject(testkit.Fault{Ops: testkit.OpExtend})
			}
			g := newGuard(t, shards{key: "b", own: own, rest: rest}, dedupe.GuardConfig{Lease: lease, ExtendEvery: lease / 10})
			items := itemsOf("", "a", "b", "c")
			lose := func(t *testing.T) {
				if tt.refuse {
					clock.Add(time.Hour)
					holdKey(t, memB, items[1].Ref, "", time.Hour)
				}
			}
			var ran []int
			res := g.Do(t.Context(), items, func(ctx context.Context, i int) error {
				ran = append(ran, i)
				switch {
				case i == 0 && !tt.running:
					lose(t)
					waitLost(t, own, rest, 2)
				case i == 1:
					lose(t)
					select {
					case <-ctx.Done():
					case <-time.After(5 * time.Second):
						t.Error("handler context not cancelled after the lease was lost")
					}
					if cause := context.Cause(ctx); !errors.Is(cause, dedupe.ErrLeaseLost) {
						t.Errorf("handler context cause = %v, want ErrLeaseLost", cause)
					}
				}
				if err := ctx.Err(); i != 1 && err != nil {
					t.Errorf("item %d: handler context ended: %v", i, context.Cause(ctx))
				}
				return nil
			})
			wantRan := []int{0, 2}
			if tt.running {
				wantRan = []int{0, 1, 2}
			}
			if !slices.Equal(ran, wantRan) {
				t.Errorf("handler ran for items %v, want %v", ran, wantRan)
			}
			// The others' leases held, for their extensions succeeded.
			for _, i := range []int{0, 2} {
				checkResult(t, fmt.Sprint("item ", i), res[i], dedupe.Completed)
				wantStatus(t, rest, items[i].Ref, dedupe.Suppressed)
			}
			if res[1].Outcome != tt.want || res[1].Wait != 0 {
				t.Errorf("item 1: %v, %v, wait %v; want %v, wait 0", res[1].Outcome, res[1].Err, res[1].Wait, tt.want)
			}
			for _, w := range tt.wantErr {
				if !errors.Is(res[1].Err, w) {
					t.Errorf("item 1: error %v, want %v", res[1].Err, w)
				}
			}
			wantStatus(t, memB, items[1].Ref, tt.wantAfter)
		})
	}
}

// TestGuardCanceled ends a Do early: the caller's context ends before Do,
// or while the first item's handler runs, or the Guard is interrupted then,
// under a claim or without one (FailOpen, the store down). No handler runs
// after the end, the later items are Canceled with its cause, not
// StoreDown, for the store did not fail, the first is settled as its
// handler says (completed, or released), every other key is free, and
// after an Interrupt a Do runs no handler.
func TestGuardCanceled(t *testing.T) {
	errStop := errors.New("test: stop")
	for _, tt := range []struct {
		name string
		// before: the caller's context ends before Do; interrupt: the
		// first handler interrupts the Guard, else it cancels Do's
		// context.
		before, interrupt, unguarded bool
		// complete: the first handler returns nil once its context ended,
		// else its context's error.
		complete  bool
		want      dedupe.Outcome
		wantErr   []error
		wantAfter dedupe.Outcome
	}{
		{name: "BeforeClaim", before: true, want: dedupe.Canceled, wantErr: []error{errStop}, wantAfter: dedupe.Acquired},
		{name: "BeforeClaimFailOpen", before: true, unguarded: true, want: dedupe.Canceled, wantErr: []error{errStop}, wantAfter: dedupe.Acquired},
		{name: "CallerCompletes", complete: true, want: dedupe.Completed, wantAfter: dedupe.Suppressed},
		{name: "CallerReleases", want: dedupe.Failed, wantErr: []error{context.Canceled}, wantAfter: dedupe.Acquired},
		{name: "CallerUnguarded", unguarded: true, complete: true, want: dedupe.Unguarded, wantErr: []error{testkit.ErrInjected}, wantAfter: dedupe.Acquired},
		{name: "Interrupt", interrupt: true, want: dedupe.Failed, wantErr: []error{context.Canceled}, wantAfter: dedupe.Acquired},
		{name: "InterruptUnguarded", interrupt: true, unguarded: true, want: dedupe.Failed, wantErr: []error{context.Canceled}, wantAfter: dedupe.Acquired},
	} {
		for _, n := range sizes {
			t.Run(fmt.Sprint(tt.name, "/Size", n), func(t *testing.T) {
				mem := memdedupe.New(memdedupe.Config{})
				fs := testkit.NewFaultStore(mem)
				if tt.unguarded {
					fs.Inject(testkit.Fault{Ops: testkit.OpClaim})
				}
				g := newGuard(t, fs, dedupe.GuardConfig{Lease: time.Minute, FailOpen: tt.unguarded})
				ctx, cancel := context.WithCancelCause(t.Context())
				defer cancel(nil)
				if tt.before {
					cancel(errStop)
				}
				items := itemsOf("", keysOf(n)...)
				var ran []int
				res := g.Do(ctx, items, func(hctx context.Context, i int) error {
					ran = append(ran, i)
					if tt.interrupt {
						g.Interrupt(errStop)
						g.Interrupt(errors.New("test: a second cause, ignored"))
					} else {
						cancel(errStop)
					}
					select {
					case <-hctx.Done():
					case <-time.After(5 * time.Second):
						t.Error("handler context not cancelled")
					}
					if cause := context.Cause(hctx); cause != errStop {
						t.Errorf("handler context cause = %v, want the end's", cause)
					}
					if tt.complete {
						return nil
					}
					return hctx.Err()
				})
				wantRan := []int{0}
				if tt.before {
					wantRan = nil
				}
				if !slices.Equal(ran, wantRan) {
					t.Errorf("handler ran for items %v, want %v", ran, wantRan)
				}
				checkResult(t, "item 0", res[0], tt.want, tt.wantErr...)
				for i := 1; i < n; i++ {
					checkResult(t, fmt.Sprint("item ", i), res[i], dedupe.Canceled, errStop)
				}
				fs.Heal() // the store is back
				for i, it := range items {
					want := dedupe.Acquired
					if i == 0 {
						want = tt.wantAfter
					}
					wantStatus(t, mem, it.Ref, want)
				}
				if !tt.interrupt {
					return
				}
				res = g.Do(t.Context(), items, func(_ context.Context, i int) error {
					t.Errorf("handler ran for item %d after the interrupt", i)
					return nil
				})
				for i, r := range res {
					checkResult(t, fmt.Sprint("after: item ", i), r, dedupe.Canceled, errStop)
				}
			})
		}
	}
}

// TestGuardPanic lets a handler panic after the keeper extended its lease:
// the panic reaches the caller, the keeper stops extending, and neither a
// goroutine nor a timer outlives Do.
func TestGuardPanic(t *testing.T) {
	const every = 10 * time.Millisecond
	errPanic := errors.New("test: boom")
	for _, tt := range []struct {
		name string
		n    int
		// unguarded: the store is down and the guard fails open.
		unguarded bool
	}{
		{"Size1", 1, false},
		{"Size3", 3, false},
		{"Unguarded", 3, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fs := testkit.NewFaultStore(memdedupe.New(memdedupe.Config{}))
			if tt.unguarded {
				fs.Inject(testkit.Fault{Ops: testkit.OpClaim})
			}
			// A lease of a minute: the keeper's extensions succeed, so only
			// a stall of a lease could end one, and the wait below for two
			// rounds of them would then never end.
			g := newGuard(t, fs, dedupe.GuardConfig{Lease: time.Minute, ExtendEvery: every, FailOpen: tt.unguarded})
			items := itemsOf("", keysOf(tt.n)...)
			last := tt.n - 1
			var ran []int
			func() {
				defer func() {
					if v := recover(); v != errPanic {
						t.Errorf("recovered %v, want the handler's panic", v)
					}
				}()
				g.Do(t.Context(), items, func(_ context.Context, i int) error {
					ran = append(ran, i)
					if i < last {
						return nil
					}
					if !tt.unguarded {
						// Until the keeper has extended the leases twice.
						for n0 := fs.Calls(testkit.OpExtend); fs.Calls(testkit.OpExtend) < n0+2*tt.n; {
							time.Sleep(every / 4)
						}
					}
					panic(errPanic)
				})
				t.Error("Do returned after its handler panicked")
			}()
			if !slices.Equal(ran, keysIndex(tt.n)) {
				t.Errorf("handler ran for items %v, want all", ran)
			}
			n := fs.Calls(testkit.OpExtend)
			time.Sleep(5 * every)
			if got := fs.Calls(testkit.OpExtend); got != n {
				t.Errorf("Extend called %d times after Do, want none", got-n)
			}
			goleak.VerifyNone(t)
		})
	}
}

// TestGuardHandlerContext checks the context a handler runs with, which
// the Guard makes cancellable only once asked to: it carries Do's values
// and deadline; a context derived from it ends with the cause of a lost
// lease; and once Do has returned it is done, whether or not its Done was
// asked for while the handler ran.
func TestGuardHandlerContext(t *testing.T) {
	type key struct{}
	e := newGuardEnv()
	g := newGuard(t, e.fs, dedupe.GuardConfig{Lease: time.Minute, ExtendEvery: 5 * time.Millisecond})
	deadline := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(context.WithValue(t.Context(), key{}, "v"), deadline)
	defer cancel()
	items := itemsOf("", keysOf(3)...)
	kept := make([]context.Context, len(items))
	res := g.Do(ctx, items, func(ctx context.Context, i int) error {
		kept[i] = ctx
		if v := ctx.Value(key{}); v != "v" {
			t.Errorf("item %d: value %v, want Do's", i, v)
		}
		if d, ok := ctx.Deadline(); !ok || !d.Equal(deadline) {
			t.Errorf("item %d: deadline %v, %v; want Do's", i, d, ok)
		}
		if tk, ok := ticketOf(ctx); !ok || tk.Ref != items[i].Ref {
			t.Errorf("item %d: ticket %v, %v; want its own", i, tk, ok)
		}
		switch i {
		case 1:
			_ = ctx.Done() // asked for: made cancellable now
		case 2:
			derived, stop := context.WithCancel(ctx)
			defer stop()
			e.clock.Add(2 * time.Minute) // the store's clock runs past the lease
			holdKey(t, e.mem, items[i].Ref, "", time.Hour)
			select {
			case <-derived.Done():
			case <-time.After(5 * time.Second):
				t.Error("derived context not cancelled after the lease was lost")
			}
			if cause := context.Cause(derived); !errors.Is(cause, dedupe.ErrLeaseLost) {
				t.Errorf("derived context cause = %v, want ErrLeaseLost", cause)
			}
			return context.Cause(ctx)
		}
		if err := ctx.Err(); err != nil {
			t.Errorf("item %d: context ended while the handler ran: %v", i, err)
		}
		return nil
	})
	for i := range 2 {
		// The store's clock ran past their leases too.
		checkResult(t, fmt.Sprint("item ", i), res[i], dedupe.LeaseLost, dedupe.ErrLeaseLost)
	}
	checkResult(t, "item 2", res[2], dedupe.Failed, dedupe.ErrLeaseLost)
	for i, c := range kept {
		select {
		case <-c.Done():
		default:
			t.Errorf("item %d: context not done after Do", i)
		}
		if err := c.Err(); !errors.Is(err, context.Canceled) {
			t.Errorf("item %d: after Do, Err = %v, want Canceled", i, err)
		}
	}
}

// TestGuardStopWaitsForTick returns from the handlers while the keeper's
// extension hangs: Do cuts the extension short rather than waiting for the
// lease's end, waits for it to return, and no extension follows.
func TestGuardStopWaitsForTick(t *testing.T) {
	const (
		lease = time.Minute
		every = 10 * time.Millisecond
	)
	for _, n := range sizes {
		t.Run(fmt.Sprint("Size", n), func(t *testing.T) {
			fs := testkit.NewFaultStore(memdedupe.New(memdedupe.Config{}))
			// The first Extend stalls until its context ends, and for 5
			// ticks more, as a store that is slow to answer would.
			var (
				once     sync.Once
				entered  = make(chan struct{}) // closed as the stalled Extend starts
				returned atomic.Bool           // set as it returns
			)
			s := &testkit.HookStore{Store: fs, Hooks: testkit.StoreHooks{Extend: func(ctx context.Context, t dedupe.Ticket) error {
				stall := false
				once.Do(func() { stall = true })
				if !stall {
					return nil
				}
				close(entered)
				<-ctx.Done()
				time.Sleep(5 * every)
				returned.Store(true)
				return fmt.Errorf("test: extend %q: %w", t.Ref, ctx.Err())
			}}}
			g := newGuard(t, s, dedupe.GuardConfig{Lease: lease, ExtendEvery: every})
			var handled time.Time
			res := g.Do(t.Context(), itemsOf("", keysOf(n)...), func(_ context.Context, i int) error {
				if i == n-1 {
					select {
					case <-entered:
					case <-time.After(5 * time.Second):
						t.Error("the keeper never extended the lease")
					}
					handled = time.Now()
				}
				return nil
			})
			if took := time.Since(handled); took > lease/4 {
				t.Errorf("Do took %v after the handlers returned: the extension was not cut short", took)
			}
			if !returned.Load() {
				t.Error("Do returned before the extension under way")
			}
			for i, r := range res {
				checkResult(t, fmt.Sprint("item ", i), r, dedupe.Completed)
			}
			c := fs.Calls(testkit.OpExtend)
			time.Sleep(5 * every)
			if got := fs.Calls(testkit.OpExtend); got != c {
				t.Errorf("Extend called %d times after Do, want none", got-c)
			}
		})
	}
}

func TestNewGuard(t *testing.T) {
	mem := memdedupe.New(memdedupe.Config{})
	tests := []struct {
		name  string
		store dedupe.Store
		cfg   dedupe.GuardConfig
		ok    bool
	}{
		{"Defaults", mem, dedupe.GuardConfig{}, true},
		{"NilStore", nil, dedupe.GuardConfig{}, false},
		{"NegativeLease", mem, dedupe.GuardConfig{Lease: -time.Second}, false},
		{"NegativeRetention", mem, dedupe.GuardConfig{Retention: -time.Second}, false},
		{"NegativeExtendEvery", mem, dedupe.GuardConfig{ExtendEvery: -time.Second}, false},
		{"ExtendEveryLease", mem, dedupe.GuardConfig{Lease: time.Second, ExtendEvery: time.Second}, false},
		{"ExtendEveryBeyondLease", mem, dedupe.GuardConfig{Lease: time.Second, ExtendEvery: 2 * time.Second}, false},
		{"NegativeCleanup", mem, dedupe.GuardConfig{CleanupTimeout: -time.Second}, false},
		{"Short", mem, dedupe.GuardConfig{Lease: time.Millisecond}, true},
		// The transactional mode needs a TxClaimer (the conformance
		// suite's Features.Tx tests run it on sqldedupe).
		{"TxWithoutTxClaimer", mem, dedupe.GuardConfig{Tx: true}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := dedupe.NewGuard(tt.store, tt.cfg)
			if (err == nil) != tt.ok {
				t.Errorf("NewGuard(%+v) = %v, want ok %v", tt.cfg, err, tt.ok)
			}
		})
	}
}

func TestGuardConfigDefaults(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  dedupe.GuardConfig
		want dedupe.GuardConfig
	}{
		{"Zero", dedupe.GuardConfig{}, dedupe.GuardConfig{
			Lease: 30 * time.Second, Retention: 72 * time.Hour, ExtendEvery: 10 * time.Second, CleanupTimeout: 5 * time.Second}},
		{"ExtendEveryFromLease", dedupe.GuardConfig{Lease: 3 * time.Minute, FailOpen: true}, dedupe.GuardConfig{
			Lease: 3 * time.Minute, Retention: 72 * time.Hour, ExtendEvery: time.Minute, CleanupTimeout: 5 * time.Second, FailOpen: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := newGuard(t, memdedupe.New(memdedupe.Config{}), tt.cfg).Config(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Config() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestGuardRepeatsInLargeBatch finds repeats in a batch too large to scan
// (a map then): each distinct key runs once, each repeat is suppressed.
func TestGuardRepeatsInLargeBatch(t *testing.T) {
	for _, size := range []int{32, 33, 100} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			g := newGuard(t, memdedupe.New(memdedupe.Config{}), dedupe.GuardConfig{})
			items := make([]dedupe.Item, size)
			for i := range items {
				// Every third item repeats the one before it.
				k := i - i/3
				if i%3 == 2 {
					k--
				}
				items[i] = dedupe.Item{Ref: dedupe.Ref{Group: "g", Key: fmt.Sprint("k", k)}}
			}
			ran := map[string]int{}
			res := g.Do(t.Context(), items, func(_ context.Context, i int) error {
				ran[items[i].Ref.Key]++
				return nil
			})
			for i, r := range res {
				want := dedupe.Completed
				if i%3 == 2 {
					want = dedupe.Suppressed
				}
				if r.Outcome != want {
					t.Fatalf("item %d (%s): %v, want %v", i, items[i].Ref.Key, r.Outcome, want)
				}
			}
			for k, n := range ran {
				if n != 1 {
					t.Fatalf("%s ran %d times", k, n)
				}
			}
		})
	}
}

// TestGuardTrace checks that a suppressed duplicate names the run that
// applied the effect: the Trace of its item, kept with the completion
// (sent at once, deferred to the next claim, or remembered by the done
// cache), or that of the batch's earlier item it repeats.
func TestGuardTrace(t *testing.T) {
	const applied, again = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	tests := []struct {
		name  string
		store func() dedupe.Store
		cfg   dedupe.GuardConfig
	}{
		{"Plain", func() dedupe.Store { return memdedupe.New(memdedupe.Config{}) }, dedupe.GuardConfig{}},
		{"Deferred", func() dedupe.Store { return memdedupe.New(memdedupe.Config{}) }, dedupe.GuardConfig{GroupCommit: true, LateFailure: func(dedupe.Ref, dedupe.Result) {}}},
		{"Cached", func() dedupe.Store { return dedupe.WithDoneCache(memdedupe.New(memdedupe.Config{}), 8) }, dedupe.GuardConfig{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGuard(t, tt.store(), tt.cfg)
			ok := func(context.Context, int) error { return nil }
			// A batch of a key twice: the repeat names the first's run.
			items := itemsOf("ffff", "k", "k")
			items[0].Trace, items[1].Trace = applied, again
			res := g.Do(t.Context(), items, ok)
			checkResult(t, "first", res[0], dedupe.Completed)
			checkResult(t, "repeat", res[1], dedupe.Suppressed)
			if res[0].Trace != "" || res[1].Trace != applied {
				t.Errorf("traces %q, %q; want none and %q", res[0].Trace, res[1].Trace, applied)
			}
			// A later duplicate, whose claim sends the deferred completion
			// first, hears it from the store.
			items = itemsOf("ffff", "k")
			items[0].Trace = again
			for range 2 {
				r := g.Do(t.Context(), items, ok)[0]
				checkResult(t, "duplicate", r, dedupe.Suppressed)
				if r.Trace != applied {
					t.Errorf("duplicate's trace %q, want %q", r.Trace, applied)
				}
			}
			if err := g.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
}
