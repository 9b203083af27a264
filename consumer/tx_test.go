package consumer_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/internal/adapter"
	"github.com/idemq/idemq/internal/sqldialect"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
)

// txBackends are the databases of the transaction tests. SQLite's
// transactions begin deferred: one takes the database's write lock at its
// first statement, the claim, and holds it to its end.
var txBackends = []testdb.Backend{testdb.SQLiteDeferred, testdb.MySQL, testdb.Postgres}

// txEnv is a dedupe store and a business table in one database.
type txEnv struct {
	t     *testing.T
	d     testdb.Backend
	dsn   string // "" when opened through hooks
	db    *sql.DB
	store *sqldedupe.Store
	// nextCommit is the commitFault of the next commit.
	nextCommit atomic.Int32
}

const txGroup = "billing"

// newTxEnv returns a fresh database of d, reached through a driver whose
// commits can be made to fail.
func newTxEnv(t *testing.T, d testdb.Backend) *txEnv {
	t.Helper()
	e := &txEnv{t: t, d: d}
	e.db = d.OpenWith(t, &testdb.Hooks{Commit: e.commit})
	e.setUp(true, sqldedupe.Config{})
	return e
}

// newTxEnvDSN returns the database at dsn, with a pool and store of its
// own, as another process has them; create makes the tables.
func newTxEnvDSN(t *testing.T, d testdb.Backend, dsn string, create bool, cfg sqldedupe.Config) *txEnv {
	t.Helper()
	e := &txEnv{t: t, d: d, dsn: dsn, db: d.OpenDSN(t, dsn)}
	e.setUp(create, cfg)
	return e
}

// impatient returns e's database with a pool and store of their own whose
// claims give up on a key another transaction holds after 200ms (1s on
// MySQL, whose unit is the second; on SQLite the pool's busy timeout).
func (e *txEnv) impatient() *txEnv {
	e.t.Helper()
	i := newTxEnvDSN(e.t, e.d, e.dsn, false, sqldedupe.Config{LockTimeout: 200 * time.Millisecond})
	if e.d.Dialect == dialect.SQLite {
		// One connection, so that the pragma holds for every statement.
		i.db.SetMaxOpenConns(1)
		if _, err := i.db.ExecContext(e.t.Context(), "PRAGMA busy_timeout = 200"); err != nil {
			e.t.Fatal(err)
		}
	}
	return i
}

// setUp opens e's store over e.db, and creates the tables if create.
func (e *txEnv) setUp(create bool, cfg sqldedupe.Config) {
	e.t.Helper()
	// Without a background cleanup, a connection in use after a delivery
	// is one that a transaction left behind.
	cfg.CleanupInterval = -1
	store, err := sqldedupe.New(e.db, e.d.Dialect, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { store.Close() })
	e.store = store
	if !create {
		return
	}
	if err := store.Migrate(e.t.Context()); err != nil {
		e.t.Fatal(err)
	}
	// No unique key: an effect applied twice shows as two rows.
	if _, err := e.db.ExecContext(e.t.Context(), "CREATE TABLE applied (k VARCHAR(255) NOT NULL, by_consumer VARCHAR(16) NOT NULL)"); err != nil {
		e.t.Fatal(err)
	}
}

// q rewrites query's ? placeholders for the dialect.
func (e *txEnv) q(query string) string { return sqldialect.Of(e.d.Dialect).Rebind(query) }

// apply is the business effect: a row naming the consumer that applied msg.
func (e *txEnv) apply(ctx context.Context, tx *sql.Tx, msg *consumer.Message, by string) error {
	_, err := tx.ExecContext(ctx, e.q("INSERT INTO applied (k, by_consumer) VALUES (?, ?)"), msgkey.Of(msg), by)
	return err
}

// applied returns who applied key, one entry per committed row.
func (e *txEnv) applied(key string) []string {
	e.t.Helper()
	rows, err := e.db.QueryContext(e.t.Context(), e.q("SELECT by_consumer FROM applied WHERE k = ? ORDER BY by_consumer"), key)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	by := []string{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			e.t.Fatal(err)
		}
		by = append(by, s)
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return by
}

// idle fails unless every connection goes back to the pool: a transaction
// must end with its delivery, whatever happened in it.
func (e *txEnv) idle() {
	e.t.Helper()
	// A transaction rolled back because its context ended gives its
	// connection back from a goroutine of database/sql's, soon after.
	testkit.WaitFor(e.t, "every connection back in the pool after the delivery", func() bool { return e.db.Stats().InUse == 0 })
}

// status is the store's answer to a claim of key, which it gives back.
func (e *txEnv) status(key string) dedupe.Outcome {
	e.t.Helper()
	ref := dedupe.Ref{Group: txGroup, Key: key}
	res, err := testkit.Claim(e.t.Context(), e.store, dedupe.Item{Ref: ref}, time.Hour)
	if err != nil {
		e.t.Fatal(err)
	}
	if res.Outcome == dedupe.Acquired {
		if err := testkit.Release(e.t.Context(), e.store, dedupe.Ticket{Ref: ref, Token: res.Token}); err != nil {
			e.t.Fatal(err)
		}
	}
	return res.Outcome
}

// txStore is a store that claims keys in a transaction.
type txStore interface {
	dedupe.Store
	dedupe.TxClaimer
}

// deliver delivers messages together and returns their verdicts.
type deliver func(context.Context, ...consumer.Message) []adapter.Verdict

// consumer returns what delivers messages, as a client that does not keep
// them in hand, to h through a transactional Consumer over store.
func (e *txEnv) consumer(store txStore, h func(context.Context, *sql.Tx, *consumer.Message) error, opts ...consumer.Option) (deliver, func() consumer.Stats) {
	e.t.Helper()
	opts = append([]consumer.Option{consumer.WithLogger(slog.New(slog.DiscardHandler))}, opts...)
	c, err := consumer.New(store, txGroup, opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	th, err := c.Tx(h)
	if err != nil {
		e.t.Fatal(err)
	}
	return func(ctx context.Context, ms ...consumer.Message) []adapter.Verdict {
		return adapter.Process(ctx, c, ms, th, adapter.Waiting{}, nil)
	}, c.Stats
}

// applier is a transactional handler (Consumer.Tx) that applies every message as by.
func (e *txEnv) applier(by string) func(context.Context, *sql.Tx, *consumer.Message) error {
	return func(ctx context.Context, tx *sql.Tx, msg *consumer.Message) error {
		return e.apply(ctx, tx, msg, by)
	}
}

var errDeclined = errors.New("card declined")

// TestTx delivers a message whose first run goes wrong in one way or
// another, then delivers it twice more. The business row and the done
// record must commit together or not at all, and the row must end up
// committed exactly once.
func TestTx(t *testing.T) {
	tests := []struct {
		name string
		// first is the first delivery's handler.
		first func(e *txEnv, ctx context.Context, tx *sql.Tx, msg *consumer.Message) error
		// wantErr is part of the first delivery's error; "" when it is
		// acknowledged.
		wantErr string
		// wantFirst and wantFinal are who applied the key after the first
		// delivery and after the redeliveries.
		wantFirst, wantFinal []string
	}{{
		name: "Success",
		first: func(e *txEnv, ctx context.Context, tx *sql.Tx, m *consumer.Message) error {
			return e.apply(ctx, tx, m, "A")
		},
		wantFirst: []string{"A"}, wantFinal: []string{"A"},
	}, {
		name: "HandlerError",
		first: func(e *txEnv, ctx context.Context, tx *sql.Tx, m *consumer.Message) error {
			if err := e.apply(ctx, tx, m, "A"); err != nil {
				return err
			}
			return errDeclined
		},
		wantErr:   errDeclined.Error(),
		wantFirst: []string{}, wantFinal: []string{"A"},
	}, {
		name: "HandlerPanic",
		first: func(e *txEnv, ctx context.Context, tx *sql.Tx, m *consumer.Message) error {
			if err := e.apply(ctx, tx, m, "A"); err != nil {
				return err
			}
			panic("boom")
		},
		wantErr:   "panicked: boom",
		wantFirst: []string{}, wantFinal: []string{"A"},
	}, {
		name: "CommitFails",
		first: func(e *txEnv, ctx context.Context, tx *sql.Tx, m *consumer.Message) error {
			e.nextCommit.Store(int32(commitRefused))
			return e.apply(ctx, tx, m, "A")
		},
		wantErr:   errCommitRefused.Error(),
		wantFirst: []string{}, wantFinal: []string{"A"},
	}, {
		// The commit took effect but its answer was lost: the retry finds
		// the record.
		name: "CommitAnswerLost",
		first: func(e *txEnv, ctx context.Context, tx *sql.Tx, m *consumer.Message) error {
			e.nextCommit.Store(int32(commitAnswerLost))
			return e.apply(ctx, tx, m, "A")
		},
		wantErr:   errCommitAnswerLost.Error(),
		wantFirst: []string{"A"}, wantFinal: []string{"A"},
	}}
	for _, d := range txBackends {
		for _, tt := range tests {
			t.Run(d.Name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				e := newTxEnv(t, d)
				// spy counts the calls of the store's non-transactional
				// API, which the transactional mode never makes: its claim
				// is its transaction's first statement, and its commit
				// records the key.
				spy := struct {
					*testkit.FaultStore
					dedupe.TxClaimer
				}{testkit.NewFaultStore(e.store), e.store}
				calls := 0
				a, stats := e.consumer(spy, func(ctx context.Context, tx *sql.Tx, m *consumer.Message) error {
					calls++
					if calls == 1 {
						return tt.first(e, ctx, tx, m)
					}
					return e.apply(ctx, tx, m, "A")
				})

				m := msg("order-1")
				want := adapter.Ack
				if tt.wantErr != "" {
					want = adapter.Retry
				}
				if v := a(t.Context(), m)[0]; v.Action != want || (v.Err == nil) != (tt.wantErr == "") || !strings.Contains(fmt.Sprint(v.Err), tt.wantErr) {
					t.Fatalf("first delivery = %+v; want %v with %q", v, want, tt.wantErr)
				}
				e.idle()
				// The record commits with the business row or not at all.
				got, status := e.applied("order-1"), e.status("order-1")
				if !slices.Equal(got, tt.wantFirst) || (status == dedupe.Suppressed) != (len(got) == 1) {
					t.Fatalf("after the first delivery: applied by %q, key %v; want applied by %q, done exactly when applied",
						got, status, tt.wantFirst)
				}

				// A failed run rolled its claim back, so the redelivery
				// runs at once; a duplicate of a done key is suppressed.
				for i := range 2 {
					if vs := a(t.Context(), m); !acked(vs) {
						t.Fatalf("redelivery %d = %+v; want Ack", i+1, vs)
					}
				}
				if got := e.applied("order-1"); !slices.Equal(got, tt.wantFinal) {
					t.Fatalf("after the redeliveries: applied by %q, want %q", got, tt.wantFinal)
				}
				if s := e.status("order-1"); s != dedupe.Suppressed {
					t.Fatalf("after the redeliveries: key %v, want done", s)
				}
				wantSuppressed := int64(1)
				if len(tt.wantFirst) == 1 {
					wantSuppressed = 2
				}
				if s := stats().Suppressed; s != wantSuppressed {
					t.Errorf("suppressed %d duplicates, want %d", s, wantSuppressed)
				}
				// One commit per message: no claim, completion, release
				// or extension besides the transaction (e.status's own
				// calls go to the store directly).
				if n := spy.Calls(testkit.OpAll); n != 0 {
					t.Errorf("the consumer called the store outside its transactions %d times", n)
				}
			})
		}
	}
}

// TestTxDuplicate delivers a message to a second consumer while the first
// runs it: the duplicate waits for the first's transaction and is
// suppressed once it commits, or runs once it rolls back. Exactly one
// effect either way, and the duplicate spends no retry.
func TestTxDuplicate(t *testing.T) {
	tests := []struct {
		name string
		// impatient makes B's claims give up on the held key before A ends:
		// B is busy, and waits in process.
		impatient bool
		// fail makes A fail after its write.
		fail      bool
		wantB     string // B's outcome
		wantFinal []string
	}{
		{name: "Waits", wantB: "suppressed", wantFinal: []string{"A"}},
		{name: "WaitsHolderFails", fail: true, wantB: "completed", wantFinal: []string{"B"}},
		{name: "Busy", impatient: true, wantB: "suppressed", wantFinal: []string{"A"}},
		{name: "BusyHolderFails", impatient: true, fail: true, wantB: "completed", wantFinal: []string{"B"}},
	}
	for _, d := range txBackends {
		for _, tt := range tests {
			t.Run(d.Name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				dsn := d.DSN(t)
				ea := newTxEnvDSN(t, d, dsn, true, sqldedupe.Config{})
				// B on a pool of its own, as another process: patient
				// enough to wait for A, or not.
				eb := newTxEnvDSN(t, d, dsn, false, sqldedupe.Config{LockTimeout: time.Minute})
				if tt.impatient {
					eb = ea.impatient()
				}
				b, bstats := eb.consumer(eb.store, eb.applier("B"))
				m := msg("order-1")
				var (
					bvs   []adapter.Verdict
					bdone = make(chan struct{})
				)
				a, astats := ea.consumer(ea.store, func(ctx context.Context, tx *sql.Tx, msg *consumer.Message) error {
					if err := ea.apply(ctx, tx, msg, "A"); err != nil {
						return err
					}
					go func() {
						defer close(bdone)
						bvs = b(context.Background(), m)
					}()
					// Hold the key until B waits for it: on its row lock,
					// or, impatient, in process.
					if tt.impatient {
						testkit.WaitFor(t, "B waiting in process for the busy key", func() bool { return bstats().Waited > 0 })
					} else if _, ok := d.LockWaits(t, ea.db); ok {
						testkit.WaitFor(t, "B waiting for A's row lock", func() bool { n, _ := d.LockWaits(t, ea.db); return n > 0 })
					} else {
						// SQLite cannot tell: B's claim waits for the
						// database's write lock, or has yet to start; either
						// way it ends as A's transaction does.
						time.Sleep(100 * time.Millisecond)
					}
					if tt.fail {
						return errDeclined
					}
					return nil
				})
				avs := a(t.Context(), m)
				<-bdone
				if acked(avs) == tt.fail || !acked(bvs) {
					t.Fatalf("A = %+v (want Ack: %v); B = %+v (want Ack)", avs, !tt.fail, bvs)
				}
				outcomes := map[string]int64{"suppressed": bstats().Suppressed, "completed": bstats().Completed}
				if outcomes[tt.wantB] != 1 || bstats().Retried != 0 || bstats().Failed != 0 || bstats().Busy != 0 {
					t.Errorf("B: suppressed %d, completed %d, retried %d, failed %d, busy %d; want %s once and no retry",
						bstats().Suppressed, bstats().Completed, bstats().Retried, bstats().Failed, bstats().Busy, tt.wantB)
				}
				if tt.impatient != (bstats().Waited > 0) {
					t.Errorf("B waited in process %d times, want it to exactly when impatient (%v)", bstats().Waited, tt.impatient)
				}
				if !tt.fail && astats().Completed != 1 {
					t.Errorf("A completed %d, want 1", astats().Completed)
				}
				if got := ea.applied("order-1"); !slices.Equal(got, tt.wantFinal) {
					t.Errorf("applied by %q, want %q", got, tt.wantFinal)
				}
				ea.idle()
				eb.idle()
			})
		}
	}
}

// TestTxStoreDown checks that a failed claim runs nothing by default,
// and with FailOpen commits the handler's writes without a record.
func TestTxStoreDown(t *testing.T) {
	tests := []struct {
		name     string
		failOpen bool
		h        func(e *txEnv) func(context.Context, *sql.Tx, *consumer.Message) error
		ack      bool
		want     []string
		// wantUnguarded counts successful runs without dedupe.
		wantUnguarded int64
	}{
		{"FailClosed", false, applierA, false, []string{}, 0},
		{"FailOpen", true, applierA, true, []string{"A"}, 1},
		{"FailOpenHandlerError", true, declined, false, []string{}, 0},
	}
	for _, d := range txBackends {
		for _, tt := range tests {
			t.Run(d.Name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				e := newTxEnv(t, d)
				down := &downStore{txStore: e.store}
				a, stats := e.consumer(down, tt.h(e), consumer.WithGuard(dedupe.GuardConfig{FailOpen: tt.failOpen}), consumer.WithStoreDownWait(time.Nanosecond))
				if vs := a(t.Context(), msg("order-1")); acked(vs) != tt.ack {
					t.Fatalf("delivery = %+v; want Ack: %v", vs, tt.ack)
				}
				e.idle()
				if got := e.applied("order-1"); !slices.Equal(got, tt.want) {
					t.Fatalf("applied by %q, want %q", got, tt.want)
				}
				if s := e.status("order-1"); s != dedupe.Acquired {
					t.Fatalf("key %v, want no record", s)
				}
				if u := stats().Unguarded; u != tt.wantUnguarded {
					t.Fatalf("unguarded %d, want %d", u, tt.wantUnguarded)
				}
			})
		}
	}
}

// TestTxStoreDownWaits fails a transactional Consumer's first claim and
// probe as if the database were unreachable: the message waits in process, as any
// store-down message, and runs once the store answers, in the same
// delivery, its effect and its key committed once.
func TestTxStoreDownWaits(t *testing.T) {
	for _, d := range txBackends {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			e := newTxEnv(t, d)
			down := &flakyStore{txStore: e.store}
			down.failing.Store(2)
			a, stats := e.consumer(down, e.applier("A"))
			if vs := a(t.Context(), msg("order-1")); !acked(vs) {
				t.Fatalf("delivery = %+v; want Ack once the store answers", vs)
			}
			e.idle()
			if got := e.applied("order-1"); !slices.Equal(got, []string{"A"}) {
				t.Fatalf("applied by %q, want [A]", got)
			}
			if s := e.status("order-1"); s != dedupe.Suppressed {
				t.Fatalf("key %v, want done", s)
			}
			if w, o := stats().StoreWaited, stats().Outages; w != 1 || o != 1 {
				t.Fatalf("store waited %d, outages %d; want 1, 1", w, o)
			}
		})
	}
}

// flakyStore is a txStore whose next failing calls (claims, and the
// Consumer's probes, which extend) fail as if it were unreachable.
type flakyStore struct {
	txStore
	failing atomic.Int32
}

var errUnreachable = errors.New("store unreachable")

func (s *flakyStore) ClaimTx(ctx context.Context, tx *sql.Tx, it dedupe.Item, retention time.Duration) (dedupe.ClaimResult, error) {
	if s.failing.Add(-1) >= 0 {
		return dedupe.ClaimResult{}, errUnreachable
	}
	return s.txStore.ClaimTx(ctx, tx, it, retention)
}

func (s *flakyStore) Extend(ctx context.Context, t dedupe.Ticket, lease time.Duration) error {
	if s.failing.Add(-1) >= 0 {
		return errUnreachable
	}
	return s.txStore.Extend(ctx, t, lease)
}

func applierA(e *txEnv) func(context.Context, *sql.Tx, *consumer.Message) error {
	return e.applier("A")
}

// declined applies as A, then fails.
func declined(e *txEnv) func(context.Context, *sql.Tx, *consumer.Message) error {
	return func(ctx context.Context, tx *sql.Tx, m *consumer.Message) error {
		if err := e.apply(ctx, tx, m, "A"); err != nil {
			return err
		}
		return errDeclined
	}
}

// downStore is a txStore whose claims fail as if it were unreachable.
type downStore struct{ txStore }

func (downStore) ClaimTx(context.Context, *sql.Tx, dedupe.Item, time.Duration) (dedupe.ClaimResult, error) {
	return dedupe.ClaimResult{}, errors.New("store unreachable")
}

// TestTxRejects checks what Tx refuses, and what a Tx handler refuses to
// run.
func TestTxRejects(t *testing.T) {
	store := newTxEnv(t, testdb.SQLite).store
	noop := func(context.Context, *sql.Tx, *consumer.Message) error { return nil }
	c, err := consumer.New(store, txGroup, consumer.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	if h, err := c.Tx(nil); err == nil || h != nil {
		t.Errorf("Tx with a nil handler = %v; want an error", err)
	}
	// Keys that cannot be stored are refused before any transaction, the
	// handler not run.
	ran := false
	h, err := c.Tx(func(context.Context, *sql.Tx, *consumer.Message) error { ran = true; return nil })
	if err != nil {
		t.Fatal(err)
	}
	bad := []consumer.Message{{ID: "no-key"}, {ID: "control", Properties: map[string]string{msgkey.Property: "a\x01b"}}}
	for i, v := range adapter.Process(t.Context(), c, bad, h, adapter.Waiting{}, nil) {
		if v.Action != adapter.Retry || v.Outcome != dedupe.InvalidKey || v.Err == nil {
			t.Errorf("message %s = %+v; want invalid-key, retried, with the reason", bad[i].ID, v)
		}
	}
	if ran {
		t.Error("the handler ran for a message whose key cannot be stored")
	}
	// A Consumer that ran messages without transactions has none to give
	// a transactional handler.
	plain, err := consumer.New(store, txGroup, consumer.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	// Nor does another Consumer's Process.
	h, err = c.Tx(noop)
	if err != nil {
		t.Fatal(err)
	}
	if v := adapter.Process(t.Context(), plain, []consumer.Message{{ID: "M", Properties: map[string]string{msgkey.Property: "k"}}}, h, adapter.Waiting{}, nil); v[0].Action != adapter.Retry || v[0].Outcome != dedupe.Failed || !strings.Contains(v[0].Err.Error(), "without its transaction") {
		t.Errorf("a Tx handler run by a Consumer without transactions = %+v; want failed, retried", v[0])
	}
	if h, err := plain.Tx(noop); err == nil || h != nil || !strings.Contains(err.Error(), "call Tx before") {
		t.Errorf("Tx on a Consumer that ran messages without transactions = %v; want an error saying to call Tx first", err)
	}
	// A store that cannot claim keys in a transaction fails at Tx, not at
	// the first message.
	mem, err := consumer.New(memdedupe.New(memdedupe.Config{}), txGroup)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Tx(noop); err == nil || !strings.Contains(err.Error(), "*memdedupe.Store") || !strings.Contains(err.Error(), "cannot claim keys in a transaction") {
		t.Errorf("Tx over memdedupe = %v; want an error naming the store and why", err)
	}
}

// commitFault is what the next commit does instead of committing.
type commitFault int32

const (
	commitNormally commitFault = iota
	// commitRefused rolls back and fails.
	commitRefused
	// commitAnswerLost commits and fails, as when the connection drops
	// before the server's answer arrives.
	commitAnswerLost
)

var (
	errCommitRefused    = errors.New("injected: commit refused")
	errCommitAnswerLost = errors.New("injected: commit answer lost")
)

// commit is the commit of e's transactions: the next one does as
// nextCommit says, then they commit normally.
func (e *txEnv) commit(commit, rollback func() error) error {
	switch commitFault(e.nextCommit.Swap(int32(commitNormally))) {
	case commitRefused:
		if err := rollback(); err != nil {
			return err
		}
		return errCommitRefused
	case commitAnswerLost:
		if err := commit(); err != nil {
			return err
		}
		return errCommitAnswerLost
	}
	return commit()
}

// TestTxReusedKey checks that Consumer.Tx neither runs nor commits a reused
// key's other body, unless the check is turned off.
func TestTxReusedKey(t *testing.T) {
	for _, d := range txBackends {
		for _, tt := range []struct {
			name         string
			opts         []consumer.Option
			wantConflict bool
		}{
			{"Default", nil, true},
			{"WithoutFingerprint", []consumer.Option{consumer.WithoutFingerprint()}, false},
		} {
			t.Run(d.Name+"/"+tt.name, func(t *testing.T) {
				e := newTxEnv(t, d)
				cb, stats := e.consumer(e.store, e.applier("A"), tt.opts...)
				if vs := cb(t.Context(), withBody("k", "A")); !acked(vs) {
					t.Fatalf("first delivery: %+v", vs)
				}
				vs := cb(t.Context(), withBody("k", "B"))
				if tt.wantConflict != (stats().Reused == 1) || tt.wantConflict == acked(vs) {
					t.Errorf("other body: %+v, reused %d; want reused: %v", vs, stats().Reused, tt.wantConflict)
				}
				if got := e.applied("k"); len(got) != 1 {
					t.Errorf("applied by %v, want once", got)
				}
				if n := stats().Reused + stats().Suppressed; n != 1 {
					t.Errorf("Reused %d + Suppressed %d, want 1 in all", stats().Reused, stats().Suppressed)
				}
				e.idle()
			})
		}
	}
}
