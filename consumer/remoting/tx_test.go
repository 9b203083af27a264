package remoting_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/consumer/remoting"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/internal/sqldialect"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
)

// txBackends are the databases of the transaction tests. SQLite's
// transactions begin deferred: a handler's first statement is a write,
// which waits its turn like any other, and until then another consumer may
// claim.
var txBackends = []testdb.Backend{testdb.SQLiteDeferred, testdb.MySQL, testdb.Postgres}

// txEnv is a dedupe store and a business table in one fresh database,
// reached through a driver whose commits can be made to fail.
type txEnv struct {
	t     *testing.T
	d     testdb.Backend
	db    *sql.DB
	store *sqldedupe.Store
	// nextCommit is the commitFault of the next commit.
	nextCommit atomic.Int32
	// wrote, if set, is closed once apply has written a row.
	wrote chan struct{}
	once  sync.Once
}

const txGroup = "billing"

func newTxEnv(t *testing.T, d testdb.Backend) *txEnv {
	t.Helper()
	e := &txEnv{t: t, d: d}
	e.db = d.OpenWith(t, &testdb.Hooks{Commit: e.commit})
	db := e.db
	// Without a background cleanup, a connection in use after a delivery
	// is one that a transaction left behind.
	store, err := sqldedupe.New(db, d.Dialect, sqldedupe.Config{CleanupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if err := store.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	// No unique key: an effect applied twice shows as two rows.
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE applied (k VARCHAR(255) NOT NULL, by_consumer VARCHAR(16) NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	e.store = store
	return e
}

// q rewrites query's ? placeholders for the dialect.
func (e *txEnv) q(query string) string { return sqldialect.Of(e.d.Dialect).Rebind(query) }

// apply is the business effect: a row naming the consumer that applied msg.
func (e *txEnv) apply(ctx context.Context, tx *sql.Tx, msg *consumer.Message, by string) error {
	_, err := tx.ExecContext(ctx, e.q("INSERT INTO applied (k, by_consumer) VALUES (?, ?)"), msgkey.Of(msg), by)
	if err == nil && e.wrote != nil {
		e.once.Do(func() { close(e.wrote) })
	}
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
func (e *txEnv) status(key string) dedupe.Status {
	e.t.Helper()
	ref := dedupe.Ref{Group: txGroup, Key: key}
	res, err := e.store.Claim(e.t.Context(), dedupe.ClaimRequest{Ref: ref, Lease: time.Hour})
	if err != nil {
		e.t.Fatal(err)
	}
	if res.Status == dedupe.Acquired {
		if err := e.store.Release(e.t.Context(), dedupe.Ticket{Ref: ref, Token: res.Token}); err != nil {
			e.t.Fatal(err)
		}
	}
	return res.Status
}

// txStore is a store that records keys in a transaction.
type txStore interface {
	dedupe.Store
	dedupe.TxCompleter
}

// consumer returns a callback that runs h through Consumer.Tx over store.
func (e *txEnv) consumer(store txStore, h consumer.TxHandler, opts ...consumer.Option) (remoting.Callback, *consumer.Stats) {
	e.t.Helper()
	opts = append([]consumer.Option{consumer.WithLogger(slog.New(slog.DiscardHandler))}, opts...)
	c, err := consumer.New(store, txGroup, opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	th, err := c.Tx(e.db, h)
	if err != nil {
		e.t.Fatal(err)
	}
	return remoting.Concurrently(c, th), c.Stats()
}

// applier is a TxHandler that applies every message as by.
func (e *txEnv) applier(by string) consumer.TxHandler {
	return func(ctx context.Context, tx *sql.Tx, msg *consumer.Message) error {
		return e.apply(ctx, tx, msg, by)
	}
}

// spyStore counts the Guard's own Complete calls and can answer Extend in
// its stead.
type spyStore struct {
	txStore
	extend func(context.Context, dedupe.Ticket, time.Duration) error
	// after, if set, holds extend back until it is closed: the store
	// answers truly until then.
	after     <-chan struct{}
	completes atomic.Int32
}

func (s *spyStore) Complete(ctx context.Context, t dedupe.Ticket, retention time.Duration) error {
	s.completes.Add(1)
	return s.txStore.Complete(ctx, t, retention)
}

func (s *spyStore) Extend(ctx context.Context, t dedupe.Ticket, lease time.Duration) error {
	if s.after != nil {
		select {
		case <-s.after:
		default:
			return s.txStore.Extend(ctx, t, lease)
		}
	}
	if s.extend != nil {
		return s.extend(ctx, t, lease)
	}
	return s.txStore.Extend(ctx, t, lease)
}

// extendNever answers success without extending, as if this consumer had
// stalled while its renewals got lost: the lease runs out under a handler
// that goes on.
func extendNever(context.Context, dedupe.Ticket, time.Duration) error { return nil }

// extendLost answers as the store does once another consumer took the key.
func extendLost(context.Context, dedupe.Ticket, time.Duration) error { return dedupe.ErrLeaseLost }

var errDeclined = errors.New("card declined")

// TestTx delivers a message whose first run goes wrong in one way or
// another, then delivers it twice more. The business row and the done
// record must commit together or not at all, and the row must end up
// committed exactly once.
func TestTx(t *testing.T) {
	short := dedupe.GuardConfig{Lease: 500 * time.Millisecond, ExtendEvery: 50 * time.Millisecond}
	tests := []struct {
		name   string
		guard  dedupe.GuardConfig
		extend func(context.Context, dedupe.Ticket, time.Duration) error
		// afterWrite holds extend back until the handler has written its
		// row, so that a slow database does not lose the lease before.
		afterWrite bool
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
	}, {
		// A's lease runs out while it still runs; B, which waits in
		// process for the key, takes it over and applies it; A's record
		// then fails and its write rolls back.
		name:   "LeaseLostBeforeRecord",
		guard:  short,
		extend: extendNever,
		first: func(e *txEnv, ctx context.Context, tx *sql.Tx, m *consumer.Message) error {
			b, bstats := e.consumer(e.store, e.applier("B"))
			// B's context is its own, not A's, which holds A's claim.
			if res, err := b(e.t.Context(), m.Raw.(*primitive.MessageExt)); res != rmq.ConsumeSuccess {
				return fmt.Errorf("consumer B: %v, %w", res, err)
			}
			if bstats.Waited.Load() == 0 || bstats.Completed.Load() != 1 {
				return fmt.Errorf("consumer B waited %d times, completed %d; want a wait and a completion", bstats.Waited.Load(), bstats.Completed.Load())
			}
			return e.apply(ctx, tx, m, "A")
		},
		wantErr:   dedupe.ErrLeaseLost.Error(),
		wantFirst: []string{"B"}, wantFinal: []string{"B"},
	}, {
		// The Guard learns that the lease is lost while the handler runs;
		// the cancelled context rolls back a handler that goes on anyway.
		name:       "LeaseLostWhileRunning",
		guard:      short,
		extend:     extendLost,
		afterWrite: true,
		first: func(e *txEnv, ctx context.Context, tx *sql.Tx, m *consumer.Message) error {
			if err := e.apply(ctx, tx, m, "A"); err != nil {
				return err
			}
			<-ctx.Done()
			return nil
		},
		wantErr:   dedupe.ErrLeaseLost.Error(),
		wantFirst: []string{}, wantFinal: []string{"A"},
	}}
	for _, d := range txBackends {
		for _, tt := range tests {
			t.Run(d.Name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				e := newTxEnv(t, d)
				spy := &spyStore{txStore: e.store, extend: tt.extend}
				if tt.afterWrite {
					e.wrote = make(chan struct{})
					spy.after = e.wrote
				}
				calls := 0
				a, stats := e.consumer(spy, func(ctx context.Context, tx *sql.Tx, m *consumer.Message) error {
					calls++
					if calls == 1 {
						return tt.first(e, ctx, tx, m)
					}
					return e.apply(ctx, tx, m, "A")
				}, consumer.WithGuard(tt.guard))

				m := msg("order-1")
				res, err := a(t.Context(), m)
				// The redeliveries run with a store that answers truly; the
				// first delivery's lease keeper has returned by now.
				spy.extend = nil
				if tt.wantErr == "" {
					if res != rmq.ConsumeSuccess || err != nil {
						t.Fatalf("first delivery = %v, %v; want success", res, err)
					}
				} else if res != rmq.ConsumeRetryLater || err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("first delivery = %v, %v; want retry later with %q", res, err, tt.wantErr)
				}
				e.idle()
				// The record commits with the business row or not at all.
				got, status := e.applied("order-1"), e.status("order-1")
				if !slices.Equal(got, tt.wantFirst) || (status == dedupe.Done) != (len(got) == 1) {
					t.Fatalf("after the first delivery: applied by %q, key %v; want applied by %q, done exactly when applied",
						got, status, tt.wantFirst)
				}

				// A failed run released its claim, so the redelivery runs at
				// once; a duplicate of a done key is suppressed.
				for i := range 2 {
					if res, err := a(t.Context(), m); res != rmq.ConsumeSuccess || err != nil {
						t.Fatalf("redelivery %d = %v, %v; want success", i+1, res, err)
					}
				}
				if got := e.applied("order-1"); !slices.Equal(got, tt.wantFinal) {
					t.Fatalf("after the redeliveries: applied by %q, want %q", got, tt.wantFinal)
				}
				if s := e.status("order-1"); s != dedupe.Done {
					t.Fatalf("after the redeliveries: key %v, want done", s)
				}
				wantSuppressed := int64(1)
				if len(tt.wantFirst) == 1 {
					wantSuppressed = 2
				}
				if s := stats.Suppressed.Load(); s != wantSuppressed {
					t.Errorf("suppressed %d duplicates, want %d", s, wantSuppressed)
				}
				// Recorded in the transaction: the Guard's own Complete would
				// be a wasted round trip.
				if n := spy.completes.Load(); n != 0 {
					t.Errorf("Guard completed %d times besides the transaction", n)
				}
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
		h        func(e *txEnv) consumer.TxHandler
		wantRes  rmq.ConsumeResult
		want     []string
		// wantUnguarded counts successful runs without dedupe.
		wantUnguarded int64
	}{
		{"FailClosed", false, applierA, rmq.ConsumeRetryLater, []string{}, 0},
		{"FailOpen", true, applierA, rmq.ConsumeSuccess, []string{"A"}, 1},
		{"FailOpenHandlerError", true, declined, rmq.ConsumeRetryLater, []string{}, 0},
	}
	for _, d := range txBackends {
		for _, tt := range tests {
			t.Run(d.Name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				e := newTxEnv(t, d)
				down := &downStore{txStore: e.store}
				a, stats := e.consumer(down, tt.h(e), consumer.WithGuard(dedupe.GuardConfig{FailOpen: tt.failOpen}), noStoreWait)
				res, err := a(t.Context(), msg("order-1"))
				if res != tt.wantRes {
					t.Fatalf("delivery = %v, %v; want %v", res, err, tt.wantRes)
				}
				e.idle()
				if got := e.applied("order-1"); !slices.Equal(got, tt.want) {
					t.Fatalf("applied by %q, want %q", got, tt.want)
				}
				if s := e.status("order-1"); s != dedupe.Acquired {
					t.Fatalf("key %v, want no record", s)
				}
				if u := stats.Unguarded.Load(); u != tt.wantUnguarded {
					t.Fatalf("unguarded %d, want %d", u, tt.wantUnguarded)
				}
			})
		}
	}
}

func applierA(e *txEnv) consumer.TxHandler { return e.applier("A") }

// declined applies as A, then fails.
func declined(e *txEnv) consumer.TxHandler {
	return func(ctx context.Context, tx *sql.Tx, m *consumer.Message) error {
		if err := e.apply(ctx, tx, m, "A"); err != nil {
			return err
		}
		return errDeclined
	}
}

// downStore is a txStore whose claims fail as if it were unreachable.
type downStore struct{ txStore }

func (downStore) Claim(context.Context, dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	return dedupe.ClaimResult{}, errors.New("store unreachable")
}

func TestTxRejects(t *testing.T) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store, err := sqldedupe.New(db, sqldedupe.SQLite, sqldedupe.Config{CleanupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	noop := func(context.Context, *sql.Tx, *consumer.Message) error { return nil }
	c, err := consumer.New(store, txGroup)
	if err != nil {
		t.Fatal(err)
	}
	if h, err := c.Tx(nil, noop); err == nil || h != nil {
		t.Errorf("Tx with a nil *sql.DB = %v; want an error", err)
	}
	if h, err := c.Tx(db, nil); err == nil || h != nil {
		t.Errorf("Tx with a nil handler = %v; want an error", err)
	}
	if _, err := consumer.New(store, ""); !errors.Is(err, dedupe.ErrInvalidKey) {
		t.Errorf("New with an empty group = %v, want ErrInvalidKey", err)
	}
	// A store that cannot record keys in a transaction fails at
	// construction, not at the first message.
	mem, err := consumer.New(memdedupe.New(memdedupe.Config{}), txGroup)
	if err != nil {
		t.Fatal(err)
	}
	h, err := mem.Tx(db, noop)
	if err == nil || h != nil || !strings.Contains(err.Error(), "*memdedupe.Store") || !strings.Contains(err.Error(), "cannot record keys in a transaction") {
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
