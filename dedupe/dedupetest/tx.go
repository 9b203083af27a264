package dedupetest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
)

// TxDatabase gives the suite what it needs of the database a
// [dedupe.TxClaimer] keeps its records in, to check that a claim commits
// or rolls back with the caller's own writes. The suite writes business
// rows of its own ids only, so one table may serve every subtest.
type TxDatabase struct {
	// Insert writes the business row id in tx.
	Insert func(ctx context.Context, tx *sql.Tx, id string) error
	// Count returns how many committed business rows id has.
	Count func(t *testing.T, id string) int
	// Impatient returns a second store on the same database whose ClaimTx
	// gives up on a key another transaction holds after a short lock
	// timeout (a second at most: the suite waits it out).
	Impatient func(t *testing.T) dedupe.Store
	// LockTimedOut reports whether err carries the database's own lock
	// timeout error, as ClaimTx's ErrBusy for a key held too long must.
	LockTimedOut func(err error) bool
	// LockWaits returns how many statements on the database wait for a
	// row lock; ok is false when the database cannot tell, and the suite
	// then waits 100ms instead.
	LockWaits func(t *testing.T) (n int, ok bool)
	// LockTimeout returns the lock timeout of tx's session, "" where the
	// database has none: ClaimTx's own timeout must not outlive the claim.
	LockTimeout func(t *testing.T, tx *sql.Tx) string
}

// txTests run when [Features.Tx] is set.
var txTests = []struct {
	name string
	fn   func(*txSuite)
}{
	{"ClaimTx", testClaimTx},
	{"ClaimTxRecords", testClaimTxRecords},
	{"ClaimTxRefuses", testClaimTxRefuses},
	{"ClaimTxWaits", testClaimTxWaits},
	{"ClaimTxLockTimeout", testClaimTxLockTimeout},
	{"TxGuard", testTxGuard},
	{"TxGuardHeld", testTxGuardHeld},
	{"TxGuardPanic", testTxGuardPanic},
	{"TxGuardInterrupt", testTxGuardInterrupt},
	{"TxGuardStoreFails", testTxGuardStoreFails},
}

// txSuite is a suite whose store claims in transactions.
type txSuite struct {
	*suite
	tc dedupe.TxClaimer
	db *TxDatabase
}

func (s *suite) tx() *txSuite {
	tc, ok := s.store.(dedupe.TxClaimer)
	if !ok {
		s.Fatalf("Features.Tx is set, and %T does not implement dedupe.TxClaimer", s.store)
	}
	return &txSuite{s, tc, s.f.Tx}
}

func (s *txSuite) begin(tc dedupe.TxClaimer) *sql.Tx {
	s.Helper()
	tx, err := tc.BeginTx(s.Context())
	if err != nil {
		s.Fatal(err)
	}
	return tx
}

// claimTx claims ref in tx, for retention, and fails the test on an error.
func (s *txSuite) claimTx(tx *sql.Tx, ref dedupe.Ref, fp string, retention time.Duration) dedupe.ClaimResult {
	s.Helper()
	res, err := s.tc.ClaimTx(s.Context(), tx, dedupe.Item{Ref: ref, Fingerprint: fp}, retention)
	if err != nil {
		s.Fatalf("ClaimTx(%q): %v", ref, err)
	}
	return res
}

// wantTx claims ref in a transaction of its own and checks the answer;
// commit says whether the transaction commits.
func (s *txSuite) wantTx(ref dedupe.Ref, fp string, retention time.Duration, commit bool, want dedupe.Outcome) dedupe.ClaimResult {
	s.Helper()
	tx := s.begin(s.tc)
	res := s.claimTx(tx, ref, fp, retention)
	s.finish(tx, commit)
	if res.Outcome != want {
		s.Fatalf("ClaimTx(%q, fingerprint %q) = %v, want %v", ref, fp, res.Outcome, want)
	}
	return res
}

// order writes the business row of ref inside tx.
func (s *txSuite) order(ctx context.Context, tx *sql.Tx, ref dedupe.Ref) error {
	return s.db.Insert(ctx, tx, ref.Group+"/"+ref.Key)
}

func (s *txSuite) ordered(ref dedupe.Ref) bool {
	s.Helper()
	return s.db.Count(s.T, ref.Group+"/"+ref.Key) == 1
}

func (s *txSuite) finish(tx *sql.Tx, commit bool) {
	s.Helper()
	end := tx.Rollback
	if commit {
		end = tx.Commit
	}
	if err := end(); err != nil {
		s.Fatal(err)
	}
}

// free fails unless ref can be claimed, and gives the claim back.
func (s *txSuite) free(ref dedupe.Ref) {
	s.Helper()
	s.release(s.acquire(ref, long), nil)
}

// waitBlocked returns once a statement of another session waits for a
// row lock: where the database cannot tell, after 100ms in which done
// stayed open.
func (s *txSuite) waitBlocked(done <-chan dedupe.ClaimResult) {
	s.Helper()
	if _, ok := s.db.LockWaits(s.T); !ok {
		select {
		case res := <-done:
			s.Fatalf("the second claim returned %v while the first transaction was open", res.Outcome)
		case <-time.After(100 * time.Millisecond):
		}
		return
	}
	testkit.WaitFor(s.T, "the second claim waiting for the first transaction's lock", func() bool {
		n, _ := s.db.LockWaits(s.T)
		return n > 0
	})
}

// testClaimTx checks that the key's record commits with the caller's own
// write or rolls back with it, and answers later claims as Claim's would.
func testClaimTx(s *txSuite) {
	ref := s.ref("order-1")
	tx := s.begin(s.tc)
	res := s.claimTx(tx, ref, "fp000001", long)
	if res.Outcome != dedupe.Acquired || res.Token == "" {
		s.Fatalf("ClaimTx of a fresh key = %+v, want acquired with a token", res)
	}
	if err := s.order(s.Context(), tx, ref); err != nil {
		s.Fatal(err)
	}
	s.finish(tx, false)
	if s.ordered(ref) {
		s.Fatal("rolled back order is there")
	}
	// Rolled back: no record at all.
	s.free(ref)

	tx = s.begin(s.tc)
	if res := s.claimTx(tx, ref, "fp000001", long); res.Outcome != dedupe.Acquired {
		s.Fatalf("ClaimTx after a rollback = %v, want acquired", res.Outcome)
	}
	if err := s.order(s.Context(), tx, ref); err != nil {
		s.Fatal(err)
	}
	s.finish(tx, true)
	if !s.ordered(ref) {
		s.Fatal("committed order is missing")
	}
	s.want(ref, "", dedupe.Suppressed)
	for _, tc := range []struct {
		fp   string
		want dedupe.Outcome
	}{{"fp000001", dedupe.Suppressed}, {"fp000002", dedupe.Reused}, {"", dedupe.Suppressed}, {"another kind", dedupe.Suppressed}} {
		res := s.wantTx(ref, tc.fp, long, false, tc.want)
		if res.Outcome == dedupe.Suppressed && (res.Remaining <= 0 || res.Remaining > long) {
			s.Errorf("ClaimTx of a done key: remaining %v, want within the retention %v", res.Remaining, long)
		}
	}
}

// testClaimTxRecords claims in a transaction keys whose records were
// written otherwise: by Claim (a consumer without transactions on the same
// table), or by an earlier transaction whose retention has ended.
func testClaimTxRecords(s *txSuite) {
	for _, tc := range []struct {
		name string
		// write leaves ref's record as the case has it.
		write func(ref dedupe.Ref)
		want  dedupe.Outcome
	}{
		{"Lease", func(ref dedupe.Ref) { s.acquire(ref, long) }, dedupe.Busy},
		{"LeaseEnded", func(ref dedupe.Ref) {
			s.acquire(ref, 10*time.Millisecond)
			time.Sleep(20 * time.Millisecond)
		}, dedupe.Acquired},
		{"Released", s.free, dedupe.Acquired},
		{"Completed", func(ref dedupe.Ref) { s.complete(s.acquire(ref, long), long, nil) }, dedupe.Suppressed},
		{"RetentionEnded", func(ref dedupe.Ref) {
			s.wantTx(ref, "", 10*time.Millisecond, true, dedupe.Acquired)
			time.Sleep(20 * time.Millisecond)
		}, dedupe.Acquired},
	} {
		ref := s.ref(tc.name)
		tc.write(ref)
		res := s.wantTx(ref, "", long, false, tc.want)
		if res.Outcome == dedupe.Busy && (res.Remaining <= 0 || res.Remaining > long) {
			s.Errorf("%s: ClaimTx of a leased key: remaining %v, want within the lease %v", tc.name, res.Remaining, long)
		}
		if res.Outcome != dedupe.Acquired {
			continue
		}
		// A rollback leaves the ended record as it was: still no record
		// for the next claim.
		s.wantTx(ref, "", long, true, dedupe.Acquired)
		s.want(ref, "", dedupe.Suppressed)
	}
}

// testClaimTxRefuses asks for keys that cannot be stored, and with
// arguments that cannot work: each is refused with a plain reason, and
// nothing is written.
func testClaimTxRefuses(s *txSuite) {
	ctx := s.Context()
	tx := s.begin(s.tc)
	for _, tc := range []struct {
		ref    dedupe.Ref
		fp     string
		reason string
	}{
		{dedupe.Ref{Group: "g"}, "", "empty key"},
		{dedupe.Ref{Key: "k"}, "", "empty group"},
		{dedupe.Ref{Group: "g", Key: strings.Repeat("k", 256)}, "", "key is 256 bytes, limit 255"},
		{dedupe.Ref{Namespace: strings.Repeat("n", 65), Group: "g", Key: "k"}, "", "namespace is 65 bytes, limit 64"},
		{dedupe.Ref{Group: "g", Key: "a\x00b"}, "", "key holds control character U+0000"},
		{dedupe.Ref{Group: "g", Key: "\xff"}, "", "key is not valid UTF-8"},
		{s.ref("k"), strings.Repeat("f", 129), "fingerprint is 129 bytes, limit 128"},
	} {
		_, err := s.tc.ClaimTx(ctx, tx, dedupe.Item{Ref: tc.ref, Fingerprint: tc.fp}, long)
		if !errors.Is(err, msgkey.ErrInvalid) || !strings.Contains(err.Error(), tc.reason) || !strings.Contains(err.Error(), "claim") {
			s.Errorf("ClaimTx(%q, fingerprint %q) = %v; want msgkey.ErrInvalid saying %q", tc.ref, tc.fp, err, tc.reason)
		}
	}
	ref := s.ref("k")
	claimTx := func(ctx context.Context, tx *sql.Tx, retention time.Duration) error {
		_, err := s.tc.ClaimTx(ctx, tx, dedupe.Item{Ref: ref}, retention)
		return err
	}
	for what, err := range map[string]error{
		"a nil *sql.Tx":  claimTx(ctx, nil, long),
		"no retention":   claimTx(ctx, tx, 0),
		"a negative one": claimTx(ctx, tx, -time.Second),
	} {
		if err == nil || errors.Is(err, msgkey.ErrInvalid) {
			s.Errorf("ClaimTx with %s = %v, want a plain error", what, err)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := claimTx(cancelled, tx, long); !errors.Is(err, context.Canceled) {
		s.Errorf("ClaimTx with a cancelled context = %v, want context.Canceled", err)
	}
	// Nothing reached the database: the transaction claims on.
	if res := s.claimTx(tx, ref, "", long); res.Outcome != dedupe.Acquired {
		s.Fatalf("ClaimTx after the refused calls = %v, want acquired", res.Outcome)
	}
	s.finish(tx, false)
	if in, ok := s.store.(dedupe.Inspector); ok {
		if st, err := in.Stats(ctx, ref.Namespace, ref.Group); err != nil || st != (dedupe.Stats{}) {
			s.Errorf("records after the refused claims and a rollback: %+v, %v; want none", st, err)
		}
	}
	s.free(ref)
}

// testClaimTxWaits claims a key in a transaction while another holds it:
// the claim waits for the first transaction, then finds the key done if
// it committed and free if it rolled back.
func testClaimTxWaits(s *txSuite) {
	for _, commit := range []bool{true, false} {
		ref := s.ref(fmt.Sprint("commit=", commit))
		first := s.begin(s.tc)
		if res := s.claimTx(first, ref, "", long); res.Outcome != dedupe.Acquired {
			s.Fatalf("first ClaimTx = %v, want acquired", res.Outcome)
		}
		if err := s.order(s.Context(), first, ref); err != nil {
			s.Fatal(err)
		}
		second := make(chan dedupe.ClaimResult, 1)
		go func() {
			res, err := func() (dedupe.ClaimResult, error) {
				// On SQLite, BEGIN IMMEDIATE waits here.
				tx, err := s.tc.BeginTx(context.Background())
				if err != nil {
					return dedupe.ClaimResult{}, err
				}
				defer tx.Rollback()
				return s.tc.ClaimTx(context.Background(), tx, dedupe.Item{Ref: ref}, long)
			}()
			if err != nil {
				s.Error(err)
			}
			second <- res
		}()
		s.waitBlocked(second)
		s.finish(first, commit)
		want := dedupe.Acquired
		if commit {
			want = dedupe.Suppressed
		}
		if res := <-second; res.Outcome != want {
			s.Errorf("second ClaimTx after the first transaction ended (commit %v) = %v, want %v", commit, res.Outcome, want)
		}
	}
}

// testClaimTxLockTimeout claims a key that another transaction holds, for
// longer than the lock timeout: the claim gives up with ErrBusy, the
// database's own error in its chain. The timeout applies to the claim alone.
func testClaimTxLockTimeout(s *txSuite) {
	impatient := s.db.Impatient(s.T).(dedupe.TxClaimer)
	ref := s.ref("order-1")
	holder := s.begin(s.tc)
	if res := s.claimTx(holder, ref, "", long); res.Outcome != dedupe.Acquired {
		s.Fatalf("holder's ClaimTx = %v, want acquired", res.Outcome)
	}
	err := func() error {
		tx, err := impatient.BeginTx(s.Context())
		if err != nil {
			return err
		}
		defer tx.Rollback()
		_, err = impatient.ClaimTx(s.Context(), tx, dedupe.Item{Ref: ref}, long)
		return err
	}()
	if !errors.Is(err, dedupe.ErrBusy) || !s.db.LockTimedOut(err) {
		s.Fatalf("claim of a key held past the lock timeout = %v; want ErrBusy and the database's lock timeout", err)
	}
	s.finish(holder, false)

	tx := s.begin(impatient)
	defer tx.Rollback()
	before := s.db.LockTimeout(s.T, tx)
	if res, err := impatient.ClaimTx(s.Context(), tx, dedupe.Item{Ref: ref}, long); err != nil || res.Outcome != dedupe.Acquired {
		s.Fatalf("claim once the holder rolled back = %v, %v; want acquired", res.Outcome, err)
	}
	if after := s.db.LockTimeout(s.T, tx); after != before {
		s.Errorf("lock timeout of the transaction after the claim = %q, want %q as before it", after, before)
	}
}

// newTxGuard returns a Guard over st in the transactional mode.
func (s *txSuite) newTxGuard(st dedupe.Store, cfg dedupe.GuardConfig) *dedupe.Guard {
	s.Helper()
	cfg.Tx = true
	g, err := dedupe.NewGuard(st, cfg)
	if err != nil {
		s.Fatal(err)
	}
	return g
}

func (s *txSuite) items(keys ...string) []dedupe.Item {
	var items []dedupe.Item
	for _, k := range keys {
		key, fp, _ := strings.Cut(k, ":")
		items = append(items, dedupe.Item{Ref: s.ref(key), Fingerprint: fp})
	}
	return items
}

var errDeclined = errors.New("dedupetest: declined")

// writer is a transactional Guard's fn that orders each item's key in its
// transaction, failing (after its write) the items listed in fail; ran
// lists the items it ran for. Unguarded says fn runs without a claim.
type writer struct {
	s         *txSuite
	items     []dedupe.Item
	fail      []int
	ran       []int
	unguarded bool
}

func (w *writer) fn(ctx context.Context, i int) error {
	w.ran = append(w.ran, i)
	tk, tx, _ := dedupe.ClaimFromContext(ctx)
	if tx == nil {
		return errors.New("no transaction in fn's context")
	}
	if w.unguarded && tk.Token != "" {
		return fmt.Errorf("ClaimFromContext of an unguarded run = %v", tk)
	}
	if !w.unguarded && (tk.Ref != w.items[i].Ref || tk.Token == "") {
		return fmt.Errorf("ClaimFromContext = %v; want item %d's", tk, i)
	}
	if err := w.s.order(ctx, tx, w.items[i].Ref); err != nil {
		return err
	}
	if slices.Contains(w.fail, i) {
		return errDeclined
	}
	return nil
}

// do runs g over items with a writer, and checks the outcomes and which
// items ran.
func (s *txSuite) do(g *dedupe.Guard, items []dedupe.Item, fail []int, want []dedupe.Outcome, wantRan []int) []dedupe.Result {
	s.Helper()
	w := &writer{s: s, items: items, fail: fail}
	res := g.Do(s.Context(), items, w.fn)
	for i, r := range res {
		if r.Outcome != want[i] {
			s.Errorf("item %d (%s) = %v, %v; want %v", i, items[i].Ref.Key, r.Outcome, r.Err, want[i])
		}
	}
	if !slices.Equal(w.ran, wantRan) {
		s.Errorf("fn ran for items %v, want %v", w.ran, wantRan)
	}
	return res
}

// testTxGuard runs batches through a transactional Guard: every outcome it
// reaches without a fault.
func testTxGuard(s *txSuite) {
	g := s.newTxGuard(s.store, dedupe.GuardConfig{})
	const (
		C = dedupe.Completed
		F = dedupe.Failed
		S = dedupe.Suppressed
		B = dedupe.Busy
		R = dedupe.Reused
		I = dedupe.InvalidKey
	)
	// A batch of fresh keys, one failing, one twice, one invalid.
	items := s.items("a:f1", "b:f1", "a:f1", ":f1", "c:f1", "b:f1")
	s.do(g, items, []int{1}, []dedupe.Outcome{C, F, S, I, C, B}, []int{0, 1, 4})
	for key, want := range map[string]bool{"a": true, "b": false, "c": true} {
		if s.ordered(s.ref(key)) != want {
			s.Errorf("key %s ordered = %v, want %v", key, !want, want)
		}
	}

	// The redelivery: done keys suppressed, the failed one runs, another
	// payload under a done key is reused.
	s.do(g, s.items("a:f1", "b:f1", "c:f2"), nil, []dedupe.Outcome{S, C, R}, []int{1})

	// A lease that a consumer without transactions holds.
	s.acquire(s.ref("d"), long)
	res := s.do(g, s.items("d"), nil, []dedupe.Outcome{B}, nil)
	if w := res[0].Wait; w <= 0 || w > long {
		s.Errorf("busy item waits %v, want what is left of the lease %v", w, long)
	}

	cancelled, cancel := context.WithCancel(s.Context())
	cancel()
	w := &writer{s: s, items: s.items("e")}
	if res := g.Do(cancelled, w.items, w.fn); res[0].Outcome != dedupe.Canceled || !errors.Is(res[0].Err, context.Canceled) || w.ran != nil {
		s.Errorf("Do with a cancelled context = %v, %v, ran %v; want canceled, not run", res[0].Outcome, res[0].Err, w.ran)
	}
}

// testTxGuardHeld runs a key that another transaction holds for longer
// than the lock timeout: busy, with no wait known, until the holder ends.
func testTxGuardHeld(s *txSuite) {
	g := s.newTxGuard(s.db.Impatient(s.T), dedupe.GuardConfig{})
	items := s.items("a")
	holder := s.begin(s.tc)
	if res := s.claimTx(holder, items[0].Ref, "", long); res.Outcome != dedupe.Acquired {
		s.Fatalf("holder's ClaimTx = %v, want acquired", res.Outcome)
	}
	res := s.do(g, items, nil, []dedupe.Outcome{dedupe.Busy}, nil)
	if !errors.Is(res[0].Err, dedupe.ErrBusy) || res[0].Wait != 0 {
		s.Errorf("busy item: %v, wait %v; want ErrBusy, wait 0 (unknown)", res[0].Err, res[0].Wait)
	}
	s.finish(holder, false)
	s.do(g, items, nil, []dedupe.Outcome{dedupe.Completed}, []int{0})
}

// testTxGuardPanic panics in fn: the panic goes on, and the transaction,
// the key's record with it, rolls back.
func testTxGuardPanic(s *txSuite) {
	g := s.newTxGuard(s.store, dedupe.GuardConfig{})
	items := s.items("a")
	func() {
		defer func() {
			if v := recover(); v != "boom" {
				s.Errorf("recovered %v, want the handler's panic", v)
			}
		}()
		w := &writer{s: s, items: items}
		g.Do(s.Context(), items, func(ctx context.Context, i int) error {
			if err := w.fn(ctx, i); err != nil {
				return err
			}
			panic("boom")
		})
	}()
	if s.ordered(items[0].Ref) {
		s.Error("the panicking handler's write is there")
	}
	s.do(g, items, nil, []dedupe.Outcome{dedupe.Completed}, []int{0})
}

// testTxGuardInterrupt interrupts a transactional Guard while the first of
// three items runs, as a drain that ran out of time does: that handler's
// context ends with Interrupt's cause and its transaction rolls back when
// it fails, the later items are Canceled with the cause without a
// transaction, every key stays free, and a Do after the interrupt runs no
// handler. The handler's context is done once Do has returned.
func testTxGuardInterrupt(s *txSuite) {
	errStop := errors.New("dedupetest: stop")
	g := s.newTxGuard(s.store, dedupe.GuardConfig{})
	items := s.items("a", "b", "c")
	w := &writer{s: s, items: items}
	var kept context.Context
	res := g.Do(s.Context(), items, func(ctx context.Context, i int) error {
		kept = ctx
		if err := w.fn(ctx, i); err != nil {
			return err
		}
		g.Interrupt(errStop)
		g.Interrupt(errors.New("dedupetest: a second cause, ignored"))
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			s.Error("handler context not cancelled by Interrupt")
		}
		if cause := context.Cause(ctx); cause != errStop {
			s.Errorf("handler context cause = %v, want Interrupt's", cause)
		}
		return ctx.Err()
	})
	if !slices.Equal(w.ran, []int{0}) {
		s.Errorf("handler ran for items %v, want [0]", w.ran)
	}
	if r := res[0]; r.Outcome != dedupe.Failed || !errors.Is(r.Err, context.Canceled) {
		s.Errorf("item 0 = %v, %v; want failed, context canceled", r.Outcome, r.Err)
	}
	for i := 1; i < len(items); i++ {
		if r := res[i]; r.Outcome != dedupe.Canceled || !errors.Is(r.Err, errStop) {
			s.Errorf("item %d = %v, %v; want canceled with Interrupt's cause", i, r.Outcome, r.Err)
		}
	}
	if kept.Err() == nil {
		s.Error("the handler's context is not done after Do returned")
	}
	res = g.Do(s.Context(), items, func(_ context.Context, i int) error {
		s.Errorf("handler ran for item %d after the interrupt", i)
		return nil
	})
	for i, r := range res {
		if r.Outcome != dedupe.Canceled || !errors.Is(r.Err, errStop) {
			s.Errorf("after: item %d = %v, %v; want canceled with Interrupt's cause", i, r.Outcome, r.Err)
		}
	}
	if s.ordered(items[0].Ref) {
		s.Error("the interrupted handler's write is there")
	}
	for _, it := range items {
		s.free(it.Ref)
	}
}

// faultyTx is a store whose BeginTx or ClaimTx fail as told.
type faultyTx struct {
	dedupe.Store
	tc           dedupe.TxClaimer
	begin, claim error
}

func (f *faultyTx) BeginTx(ctx context.Context) (*sql.Tx, error) {
	if f.begin != nil {
		return nil, f.begin
	}
	return f.tc.BeginTx(ctx)
}

func (f *faultyTx) ClaimTx(ctx context.Context, tx *sql.Tx, it dedupe.Item, retention time.Duration) (dedupe.ClaimResult, error) {
	if f.claim != nil {
		return dedupe.ClaimResult{}, f.claim
	}
	return f.tc.ClaimTx(ctx, tx, it, retention)
}

// testTxGuardStoreFails fails the transaction's begin or the claim: the
// handler does not run, except with FailOpen after a failed claim, when it
// runs in a transaction of its own, without a record.
func testTxGuardStoreFails(s *txSuite) {
	errDown := errors.New("dedupetest: store down")
	for _, tc := range []struct {
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
	} {
		g := s.newTxGuard(&faultyTx{Store: s.store, tc: s.tc, begin: tc.begin, claim: tc.claim}, dedupe.GuardConfig{FailOpen: tc.failOpen})
		w := &writer{s: s, items: s.items(tc.name), fail: tc.fail, unguarded: true}
		res := g.Do(s.Context(), w.items, w.fn)
		if res[0].Outcome != tc.want || (w.ran != nil) != tc.ran {
			s.Fatalf("%s: Do = %v, %v, ran %v; want %v, ran %v", tc.name, res[0].Outcome, res[0].Err, w.ran != nil, tc.want, tc.ran)
		}
		if tc.want == dedupe.StoreDown || tc.want == dedupe.Unguarded {
			if !errors.Is(res[0].Err, errDown) {
				s.Errorf("%s: Do's error = %v, want the store's", tc.name, res[0].Err)
			}
		}
		if s.ordered(w.items[0].Ref) != tc.ordered {
			s.Errorf("%s: ordered = %v, want %v", tc.name, !tc.ordered, tc.ordered)
		}
		// No record either way.
		s.free(w.items[0].Ref)
	}
}
