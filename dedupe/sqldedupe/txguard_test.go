package sqldedupe_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/internal/sqldialect"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/msgkey"
)

// The guard's transactional mode is tested here, on the real databases,
// rather than in package dedupe: every path it takes goes through a real
// transaction.

// newTxGuard returns a Guard over s in the transactional mode.
func newTxGuard(t *testing.T, s dedupe.Store, cfg dedupe.GuardConfig) *dedupe.Guard {
	t.Helper()
	cfg.Tx = true
	g, err := dedupe.NewGuard(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func item(key, fp string) dedupe.Item {
	return dedupe.Item{Ref: dedupe.Ref{Group: "g", Key: key}, Fingerprint: fp}
}

// writer is a transactional Guard's fn that orders each item's key in its transaction,
// failing (after its write) the items listed in fail; ran lists the items
// it ran for.
type writer struct {
	e     *txEnv
	items []dedupe.Item
	fail  []int
	ran   []int
}

var errDeclined = errors.New("test: declined")

func (w *writer) fn(ctx context.Context, i int) error {
	w.ran = append(w.ran, i)
	tx, ok := txOf(ctx)
	if !ok {
		return errors.New("no transaction in fn's context")
	}
	if tk, ok := ticketOf(ctx); !ok || tk.Ref != w.items[i].Ref || tk.Token == "" {
		return fmt.Errorf("ClaimFromContext = %v, %v; want item %d's", tk, ok, i)
	}
	if _, err := tx.ExecContext(ctx, sqldialect.Of(w.e.b.Dialect).Rebind("INSERT INTO orders (id) VALUES (?)"), w.items[i].Ref.Key); err != nil {
		return err
	}
	if slices.Contains(w.fail, i) {
		return errDeclined
	}
	return nil
}

// do runs g over items with a writer, and checks the outcomes and which
// items ran.
func (e *txEnv) do(g *dedupe.Guard, items []dedupe.Item, fail []int, want []dedupe.Outcome, wantRan []int) []dedupe.Result {
	e.t.Helper()
	w := &writer{e: e, items: items, fail: fail}
	res := g.Do(e.t.Context(), items, w.fn)
	for i, r := range res {
		if r.Outcome != want[i] {
			e.t.Errorf("item %d (%s) = %v, %v; want %v", i, items[i].Ref.Key, r.Outcome, r.Err, want[i])
		}
	}
	if !slices.Equal(w.ran, wantRan) {
		e.t.Errorf("fn ran for items %v, want %v", w.ran, wantRan)
	}
	return res
}

// TestTxGuard runs batches through a transactional Guard: every outcome it
// reaches without a fault.
func TestTxGuard(t *testing.T) {
	for _, b := range testdb.Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			e := newTxEnv(t, b, sqldedupe.Config{})
			g := newTxGuard(t, e.s, dedupe.GuardConfig{})
			const (
				C = dedupe.Completed
				F = dedupe.Failed
				S = dedupe.Suppressed
				B = dedupe.Busy
				R = dedupe.Reused
				I = dedupe.InvalidKey
			)

			// A batch of fresh keys, one failing, one twice, one
			// invalid.
			items := []dedupe.Item{item("a", "f1"), item("b", "f1"), item("a", "f1"), item("", "f1"), item("c", "f1"), item("b", "f1")}
			e.do(g, items, []int{1}, []dedupe.Outcome{C, F, S, I, C, B}, []int{0, 1, 4})
			for key, want := range map[string]bool{"a": true, "b": false, "c": true} {
				if e.ordered(key) != want {
					t.Errorf("key %s ordered = %v, want %v", key, !want, want)
				}
			}

			// The redelivery: done keys suppressed, the failed one runs,
			// another payload under a done key is reused.
			items = []dedupe.Item{item("a", "f1"), item("b", "f1"), item("c", "f2")}
			e.do(g, items, nil, []dedupe.Outcome{S, C, R}, []int{1})

			// A lease that a consumer without transactions holds.
			acquire(t, e.s, dedupe.Ref{Group: "g", Key: "d"}, long)
			res := e.do(g, []dedupe.Item{item("d", "")}, nil, []dedupe.Outcome{B}, nil)
			if w := res[0].Wait; w <= 0 || w > long {
				t.Errorf("busy item waits %v, want what is left of the lease %v", w, long)
			}

			cancelled, cancel := context.WithCancel(t.Context())
			cancel()
			w := &writer{e: e, items: []dedupe.Item{item("e", "")}}
			if res := g.Do(cancelled, w.items, w.fn); res[0].Outcome != dedupe.Canceled || !errors.Is(res[0].Err, context.Canceled) || w.ran != nil {
				t.Errorf("Do with a cancelled context = %v, %v, ran %v; want canceled, not run", res[0].Outcome, res[0].Err, w.ran)
			}
		})
	}
}

// TestTxGuardHeld runs a key that another transaction holds for longer
// than the lock timeout: busy, with no wait known, until the holder ends.
func TestTxGuardHeld(t *testing.T) {
	for _, b := range testdb.Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			e := newTxEnv(t, b, sqldedupe.Config{})
			g := newTxGuard(t, e.impatient(), dedupe.GuardConfig{})
			ref := dedupe.Ref{Group: "g", Key: "a"}
			holder := e.begin(e.s)
			if res := e.claimTx(holder, ref, "", long); res.Outcome != dedupe.Acquired {
				t.Fatalf("holder's ClaimTx = %v, want acquired", res.Outcome)
			}
			items := []dedupe.Item{item("a", "")}
			res := e.do(g, items, nil, []dedupe.Outcome{dedupe.Busy}, nil)
			if !errors.Is(res[0].Err, dedupe.ErrBusy) || res[0].Wait != 0 {
				t.Errorf("busy item: %v, wait %v; want ErrBusy, wait 0 (unknown)", res[0].Err, res[0].Wait)
			}
			e.finish(holder, false)
			e.do(g, items, nil, []dedupe.Outcome{dedupe.Completed}, []int{0})
		})
	}
}

// TestTxGuardPanic panics in fn: the panic goes on, and the transaction,
// the key's record with it, rolls back.
func TestTxGuardPanic(t *testing.T) {
	for _, b := range testdb.Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			e := newTxEnv(t, b, sqldedupe.Config{})
			g := newTxGuard(t, e.s, dedupe.GuardConfig{})
			items := []dedupe.Item{item("a", "")}
			func() {
				defer func() {
					if v := recover(); v != "boom" {
						t.Errorf("recovered %v, want the handler's panic", v)
					}
				}()
				g.Do(t.Context(), items, func(ctx context.Context, i int) error {
					w := &writer{e: e, items: items}
					if err := w.fn(ctx, i); err != nil {
						return err
					}
					panic("boom")
				})
			}()
			if e.ordered("a") {
				t.Error("the panicking handler's write is there")
			}
			e.do(g, items, nil, []dedupe.Outcome{dedupe.Completed}, []int{0})
		})
	}
}

// TestTxGuardInterrupt interrupts a transactional Guard while the first of three items
// runs, as a drain that ran out of time does: that handler's context ends
// with Interrupt's cause and its transaction rolls back when it fails, the
// later items are Canceled with the cause without a transaction, every key
// stays free, and a Do after the interrupt runs no handler. The handler's
// context is done once Do has returned.
func TestTxGuardInterrupt(t *testing.T) {
	errStop := errors.New("test: stop")
	for _, b := range testdb.Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			e := newTxEnv(t, b, sqldedupe.Config{})
			g := newTxGuard(t, e.s, dedupe.GuardConfig{})
			items := []dedupe.Item{item("a", ""), item("b", ""), item("c", "")}
			w := &writer{e: e, items: items}
			var kept context.Context
			res := g.Do(t.Context(), items, func(ctx context.Context, i int) error {
				kept = ctx
				if err := w.fn(ctx, i); err != nil {
					return err
				}
				g.Interrupt(errStop)
				g.Interrupt(errors.New("test: a second cause, ignored"))
				select {
				case <-ctx.Done():
				case <-time.After(5 * time.Second):
					t.Error("handler context not cancelled by Interrupt")
				}
				if cause := context.Cause(ctx); cause != errStop {
					t.Errorf("handler context cause = %v, want Interrupt's", cause)
				}
				return ctx.Err()
			})
			if !slices.Equal(w.ran, []int{0}) {
				t.Errorf("handler ran for items %v, want [0]", w.ran)
			}
			if r := res[0]; r.Outcome != dedupe.Failed || !errors.Is(r.Err, context.Canceled) {
				t.Errorf("item 0 = %v, %v; want failed, context canceled", r.Outcome, r.Err)
			}
			for i := 1; i < len(items); i++ {
				if r := res[i]; r.Outcome != dedupe.Canceled || !errors.Is(r.Err, errStop) {
					t.Errorf("item %d = %v, %v; want canceled with Interrupt's cause", i, r.Outcome, r.Err)
				}
			}
			if kept.Err() == nil {
				t.Error("the handler's context is not done after Do returned")
			}
			res = g.Do(t.Context(), items, func(_ context.Context, i int) error {
				t.Errorf("handler ran for item %d after the interrupt", i)
				return nil
			})
			for i, r := range res {
				if r.Outcome != dedupe.Canceled || !errors.Is(r.Err, errStop) {
					t.Errorf("after: item %d = %v, %v; want canceled with Interrupt's cause", i, r.Outcome, r.Err)
				}
			}
			if e.ordered("a") {
				t.Error("the interrupted handler's write is there")
			}
			for _, it := range items {
				e.free(it.Ref)
			}
		})
	}
}

// faultyStore is a Store whose BeginTx or ClaimTx fail as told.
type faultyStore struct {
	*sqldedupe.Store
	begin, claim error
}

func (s *faultyStore) BeginTx(ctx context.Context) (*sql.Tx, error) {
	if s.begin != nil {
		return nil, s.begin
	}
	return s.Store.BeginTx(ctx)
}

func (s *faultyStore) ClaimTx(ctx context.Context, tx *sql.Tx, it dedupe.Item, retention time.Duration) (dedupe.ClaimResult, error) {
	if s.claim != nil {
		return dedupe.ClaimResult{}, s.claim
	}
	return s.Store.ClaimTx(ctx, tx, it, retention)
}

// TestTxGuardStoreFails fails the transaction's begin or the claim: the
// handler does not run, except with FailOpen after a failed claim, when it
// runs in a transaction of its own, without a record.
func TestTxGuardStoreFails(t *testing.T) {
	errDown := errors.New("test: store down")
	tests := []struct {
		name         string
		failOpen     bool
		begin, claim error
		fail         []int
		want         dedupe.Outcome
		ran, ordered bool
	}{
		{name: "ClaimFailsClosed", claim: errDown, want: dedupe.StoreDown},
		{name: "BeginFailsClosed", begin: errDown, want: dedupe.StoreDown},
		{name: "ClaimFailsOpen", failOpen: true, claim: errDown, want: dedupe.Unguarded, ran: true, ordered: true},
		{name: "ClaimFailsOpenHandlerFails", failOpen: true, claim: errDown, fail: []int{0}, want: dedupe.Failed, ran: true},
		// Nothing to run the handler's transaction on.
		{name: "BeginFailsOpen", failOpen: true, begin: errDown, want: dedupe.StoreDown},
		// A key held is not a store down.
		{name: "HeldOpen", failOpen: true, claim: fmt.Errorf("held: %w", dedupe.ErrBusy), want: dedupe.Busy},
		{name: "InvalidOpen", failOpen: true, claim: fmt.Errorf("bad: %w", msgkey.ErrInvalid), want: dedupe.InvalidKey},
	}
	for _, b := range testdb.Backends {
		for _, tc := range tests {
			t.Run(b.Name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				e := newTxEnv(t, b, sqldedupe.Config{})
				g := newTxGuard(t, &faultyStore{Store: e.s, begin: tc.begin, claim: tc.claim}, dedupe.GuardConfig{FailOpen: tc.failOpen})
				items := []dedupe.Item{item("a", "")}
				var ran bool
				res := g.Do(t.Context(), items, func(ctx context.Context, i int) error {
					ran = true
					// Unguarded: a transaction, and no claim.
					if tk, ok := ticketOf(ctx); ok {
						return fmt.Errorf("ClaimFromContext of an unguarded run = %v, true", tk)
					}
					tx, ok := txOf(ctx)
					if !ok {
						return errors.New("no transaction in fn's context")
					}
					if _, err := tx.ExecContext(ctx, sqldialect.Of(b.Dialect).Rebind("INSERT INTO orders (id) VALUES (?)"), "a"); err != nil {
						return err
					}
					if slices.Contains(tc.fail, i) {
						return errDeclined
					}
					return nil
				})
				if res[0].Outcome != tc.want || ran != tc.ran {
					t.Fatalf("Do = %v, %v, ran %v; want %v, ran %v", res[0].Outcome, res[0].Err, ran, tc.want, tc.ran)
				}
				if tc.want == dedupe.StoreDown || tc.want == dedupe.Unguarded {
					if !errors.Is(res[0].Err, errDown) {
						t.Errorf("Do's error = %v, want the store's", res[0].Err)
					}
				}
				if e.ordered("a") != tc.ordered {
					t.Errorf("ordered = %v, want %v", !tc.ordered, tc.ordered)
				}
				// No record either way.
				e.free(dedupe.Ref{Group: "g", Key: "a"})
			})
		}
	}
}

// ticketOf is the ticket fn's context carries; ok when fn runs under a
// claim.
func ticketOf(ctx context.Context) (dedupe.Ticket, bool) {
	t, _, _ := dedupe.ClaimFromContext(ctx)
	return t, t.Token != ""
}

// txOf is the transaction fn's context carries, in the transactional mode.
func txOf(ctx context.Context) (*sql.Tx, bool) {
	_, tx, _ := dedupe.ClaimFromContext(ctx)
	return tx, tx != nil
}
