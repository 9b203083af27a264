package sqldedupe_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testkit"
)

const long = time.Hour

func claim(t *testing.T, s *sqldedupe.Store, ref dedupe.Ref, lease time.Duration) dedupe.ClaimResult {
	t.Helper()
	res, err := testkit.Claim(t.Context(), s, dedupe.Item{Ref: ref}, lease)
	if err != nil {
		t.Fatalf("Claim(%q): %v", ref, err)
	}
	return res
}

func acquire(t *testing.T, s *sqldedupe.Store, ref dedupe.Ref, lease time.Duration) dedupe.Ticket {
	t.Helper()
	res := claim(t, s, ref, lease)
	if res.Outcome != dedupe.Acquired {
		t.Fatalf("Claim(%q) = %v, want acquired", ref, res.Outcome)
	}
	return dedupe.Ticket{Ref: ref, Token: res.Token}
}

func TestNew(t *testing.T) {
	db, err := sql.Open("sqlite", ":memory:") // never connects
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tests := []struct {
		name    string
		db      *sql.DB
		dialect dialect.Dialect
		cfg     sqldedupe.Config
		ok      bool
	}{
		{"Defaults", db, dialect.SQLite, sqldedupe.Config{}, true},
		{"MySQL", db, dialect.MySQL, sqldedupe.Config{}, true},
		{"Postgres", db, dialect.Postgres, sqldedupe.Config{}, true},
		// The table name rule is sqldialect.ValidTable's (TestValidTable).
		{"Table", db, dialect.SQLite, sqldedupe.Config{Table: "Orders_dedupe2"}, true},
		{"CleanupDisabled", db, dialect.SQLite, sqldedupe.Config{CleanupInterval: -1}, true},
		{"NilDB", nil, dialect.SQLite, sqldedupe.Config{}, false},
		{"NoDialect", db, 0, sqldedupe.Config{}, false},
		{"UnknownDialect", db, dialect.SQLite + 1, sqldedupe.Config{}, false},
		{"TableQuote", db, dialect.Postgres, sqldedupe.Config{Table: `t"; DROP TABLE x; --`}, false},
		{"NegativeBatch", db, dialect.SQLite, sqldedupe.Config{CleanupBatch: -1}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := sqldedupe.New(tc.db, tc.dialect, tc.cfg)
			if (err == nil) != tc.ok {
				t.Fatalf("New(%v, %+v) = %v, want ok %v", tc.dialect, tc.cfg, err, tc.ok)
			}
			if err == nil {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			}
		})
	}
}

// TestMigrate checks that Migrate can run again and that stores on two
// tables of one database keep apart.
func TestMigrate(t *testing.T) {
	for _, b := range testdb.Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			db := b.Open(t)
			s1 := newStore(t, db, b.Dialect, sqldedupe.Config{})
			if err := s1.Migrate(t.Context()); err != nil {
				t.Fatalf("second Migrate: %v", err)
			}
			s2 := newStore(t, db, b.Dialect, sqldedupe.Config{Table: "Other_Table"})
			ref := dedupe.Ref{Group: "g", Key: "k"}
			acquire(t, s1, ref, long)
			acquire(t, s2, ref, long)
			if res := claim(t, s1, ref, long); res.Outcome != dedupe.Busy {
				t.Errorf("Claim on the first table = %v, want in flight", res.Outcome)
			}
		})
	}
}

// TestStatements counts the statements each call sends, the round trips the
// package documentation promises.
func TestStatements(t *testing.T) {
	type env struct {
		s  *sqldedupe.Store
		db *sql.DB
		g  string // the subtest's group
	}
	refs := func(e env, prefix string, n int) []dedupe.Ref {
		out := make([]dedupe.Ref, n)
		for i := range out {
			out[i] = dedupe.Ref{Group: e.g, Key: fmt.Sprint(prefix, i)}
		}
		return out
	}
	claimAll := func(t *testing.T, e env, refs []dedupe.Ref) []dedupe.Ticket {
		t.Helper()
		var ts []dedupe.Ticket
		for _, r := range refs {
			ts = append(ts, acquire(t, e.s, r, long))
		}
		return ts
	}
	// claimInTx claims ref in a transaction of its own, which it commits or
	// rolls back.
	claimInTx := func(t *testing.T, e env, ref dedupe.Ref, commit bool) dedupe.ClaimResult {
		t.Helper()
		tx, err := e.s.BeginTx(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		res, err := e.s.ClaimTx(t.Context(), tx, dedupe.Item{Ref: ref}, long)
		if err != nil {
			t.Fatal(err)
		}
		if commit {
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		return res
	}
	batch := func(refs []dedupe.Ref) []dedupe.Item {
		var reqs []dedupe.Item
		for _, r := range refs {
			reqs = append(reqs, dedupe.Item{Ref: r})
		}
		return reqs
	}
	mustBatch := func(t *testing.T, errs []error, err error, want error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range errs {
			if !errors.Is(e, want) || (want == nil && e != nil) {
				t.Fatalf("item %d = %v, want %v", i, e, want)
			}
		}
	}
	tests := []struct {
		name string
		// setup runs uncounted; do is counted.
		setup func(t *testing.T, e env) any
		do    func(t *testing.T, e env, v any)
		want  int64
		mysql int64 // when MySQL differs
	}{{
		name: "ClaimFresh",
		do:   func(t *testing.T, e env, _ any) { acquire(t, e.s, refs(e, "k", 1)[0], long) },
		want: 1,
	}, {
		name:  "ClaimInFlight",
		setup: func(t *testing.T, e env) any { return claimAll(t, e, refs(e, "k", 1)) },
		do: func(t *testing.T, e env, _ any) {
			if res := claim(t, e.s, refs(e, "k", 1)[0], long); res.Outcome != dedupe.Busy {
				t.Fatalf("Claim = %v, want in flight", res.Outcome)
			}
		},
		want: 1, mysql: 2,
	}, {
		name: "ClaimManyFresh",
		do: func(t *testing.T, e env, _ any) {
			res, errs, err := e.s.Claim(t.Context(), batch(refs(e, "k", 32)), long)
			mustBatch(t, errs, err, nil)
			for _, r := range res {
				if r.Outcome != dedupe.Acquired {
					t.Fatalf("Claim item = %v, want acquired", r.Outcome)
				}
			}
		},
		want: 1,
	}, {
		name:  "ClaimManyHalfInFlight",
		setup: func(t *testing.T, e env) any { return claimAll(t, e, refs(e, "k", 16)) },
		do: func(t *testing.T, e env, _ any) {
			res, errs, err := e.s.Claim(t.Context(), batch(refs(e, "k", 32)), long)
			mustBatch(t, errs, err, nil)
			for i, r := range res {
				if want := dedupe.Busy; i >= 16 {
					want = dedupe.Acquired
					if r.Outcome != want {
						t.Fatalf("Claim item %d = %v, want %v", i, r.Outcome, want)
					}
				} else if r.Outcome != want {
					t.Fatalf("Claim item %d = %v, want %v", i, r.Outcome, want)
				}
			}
		},
		want: 1, mysql: 2,
	}, {
		// A key twice in a batch is answered as two calls in a row.
		name: "ClaimManyRepeatedKey",
		do: func(t *testing.T, e env, _ any) {
			r := refs(e, "k", 2)
			res, errs, err := e.s.Claim(t.Context(), batch([]dedupe.Ref{r[0], r[1], r[0]}), long)
			mustBatch(t, errs, err, nil)
			if got := []dedupe.Outcome{res[0].Outcome, res[1].Outcome, res[2].Outcome}; !slices.Equal(got, []dedupe.Outcome{dedupe.Acquired, dedupe.Acquired, dedupe.Busy}) {
				t.Fatalf("Claim = %v", got)
			}
		},
		want: 2, mysql: 3,
	}, {
		name: "ClaimManyLarge",
		do: func(t *testing.T, e env, _ any) {
			_, errs, err := e.s.Claim(t.Context(), batch(refs(e, "k", 600)), long)
			mustBatch(t, errs, err, nil)
		},
		want: 3, // 256 + 256 + 88
	}, {
		name:  "CompleteMany",
		setup: func(t *testing.T, e env) any { return claimAll(t, e, refs(e, "k", 32)) },
		do: func(t *testing.T, e env, v any) {
			errs, err := e.s.Complete(t.Context(), v.([]dedupe.Ticket), long)
			mustBatch(t, errs, err, nil)
		},
		want: 1,
	}, {
		name:  "CompleteManyHalfLost",
		setup: func(t *testing.T, e env) any { return claimAll(t, e, refs(e, "k", 32)) },
		do: func(t *testing.T, e env, v any) {
			ts := slices.Clone(v.([]dedupe.Ticket))
			for i := range 16 {
				ts[i].Token = "bogus"
			}
			errs, err := e.s.Complete(t.Context(), ts, long)
			mustBatch(t, errs[:16], err, dedupe.ErrLeaseLost)
			mustBatch(t, errs[16:], err, nil)
		},
		want: 1, mysql: 2,
	}, {
		name:  "ReleaseMany",
		setup: func(t *testing.T, e env) any { return claimAll(t, e, refs(e, "k", 32)) },
		do: func(t *testing.T, e env, v any) {
			errs, err := e.s.Release(t.Context(), v.([]dedupe.Ticket))
			mustBatch(t, errs, err, nil)
		},
		want: 1, mysql: 2, // and BEGIN and COMMIT
	}, {
		name:  "Release",
		setup: func(t *testing.T, e env) any { return claimAll(t, e, refs(e, "k", 1)) },
		do: func(t *testing.T, e env, v any) {
			if err := testkit.Release(t.Context(), e.s, v.([]dedupe.Ticket)[0]); err != nil {
				t.Fatal(err)
			}
		},
		want: 1,
	}, {
		name:  "Extend",
		setup: func(t *testing.T, e env) any { return claimAll(t, e, refs(e, "k", 1)) },
		do: func(t *testing.T, e env, v any) {
			if err := e.s.Extend(t.Context(), v.([]dedupe.Ticket)[0], long); err != nil {
				t.Fatal(err)
			}
		},
		want: 1,
	}, {
		// BEGIN and COMMIT are not statements here.
		name: "ClaimTxFresh",
		do: func(t *testing.T, e env, _ any) {
			if res := claimInTx(t, e, refs(e, "k", 1)[0], true); res.Outcome != dedupe.Acquired {
				t.Fatalf("ClaimTx = %v, want acquired", res.Outcome)
			}
		},
		want: 1,
	}, {
		name: "ClaimTxDone",
		setup: func(t *testing.T, e env) any {
			return claimInTx(t, e, refs(e, "k", 1)[0], true)
		},
		do: func(t *testing.T, e env, _ any) {
			if res := claimInTx(t, e, refs(e, "k", 1)[0], false); res.Outcome != dedupe.Suppressed {
				t.Fatalf("ClaimTx = %v, want done", res.Outcome)
			}
		},
		want: 1, mysql: 2,
	}}
	for _, b := range testdb.Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			h := &testdb.Hooks{}
			db := b.OpenWith(t, h)
			s := newStore(t, db, b.Dialect, sqldedupe.Config{})
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					// A first run on keys of its own prepares the
					// statements, so that the counted run counts what
					// runs, not a statement's first use.
					var v any
					for _, g := range []string{t.Name() + "/warm", t.Name()} {
						e := env{s: s, db: db, g: g}
						if tc.setup != nil {
							v = tc.setup(t, e)
						}
						if g != t.Name() {
							tc.do(t, e, v)
						}
					}
					e := env{s: s, db: db, g: t.Name()}
					before := h.Runs.Load()
					tc.do(t, e, v)
					want := tc.want
					if b.Dialect == dialect.MySQL && tc.mysql != 0 {
						want = tc.mysql
					}
					if got := h.Runs.Load() - before; got != want {
						t.Errorf("%s sent %d statements, want %d", tc.name, got, want)
					}
				})
			}
		})
	}
}

// TestFastPathAfterKeptRecord checks, on one MySQL connection, that a claim
// which kept a record and so set LAST_INSERT_ID does not make the next
// statement's claims look kept: the id reaches the client per statement.
func TestFastPathAfterKeptRecord(t *testing.T) {
	h := &testdb.Hooks{}
	db := testdb.MySQL.OpenWith(t, h)
	db.SetMaxOpenConns(1)
	s := newStore(t, db, dialect.MySQL, sqldedupe.Config{})
	ref := dedupe.Ref{Group: "g", Key: "kept"}
	acquire(t, s, ref, long)
	claim(t, s, ref, long) // kept: LAST_INSERT_ID(1)
	before := h.Runs.Load()
	acquire(t, s, dedupe.Ref{Group: "g", Key: "fresh"}, long)
	if got := h.Runs.Load() - before; got != 1 {
		t.Errorf("fresh claim after a kept one sent %d statements, want 1", got)
	}
}

// TestProxyWithoutInsertID claims through a MySQL proxy that drops the
// insert id the kept record's LAST_INSERT_ID sets: the rows affected still
// show that a lone claim was not acquired.
func TestProxyWithoutInsertID(t *testing.T) {
	db := testdb.MySQL.OpenWith(t, &testdb.Hooks{NoInsertID: true})
	s := newStore(t, db, dialect.MySQL, sqldedupe.Config{})
	ref := dedupe.Ref{Group: "g", Key: "k"}
	tk := acquire(t, s, ref, long)
	if res := claim(t, s, ref, long); res.Outcome != dedupe.Busy {
		t.Errorf("second Claim = %v, want in flight", res.Outcome)
	}
	if err := testkit.Complete(t.Context(), s, tk, long); err != nil {
		t.Fatal(err)
	}
	if res := claim(t, s, ref, long); res.Outcome != dedupe.Suppressed {
		t.Errorf("Claim after Complete = %v, want done", res.Outcome)
	}
}

// TestSessionTimeZone runs claims in sessions whose time zone is far from
// UTC: leases are the database's UTC instants, so Until and Remaining stay
// right and a short lease still ends on time.
func TestSessionTimeZone(t *testing.T) {
	zoned := []struct {
		name    string
		dialect dialect.Dialect
		driver  string
		dsn     func(testing.TB) string
	}{
		{"MySQL", dialect.MySQL, "mysql", func(tb testing.TB) string {
			cfg, err := mysql.ParseDSN(testdb.MySQL.DSN(tb))
			if err != nil {
				tb.Fatal(err)
			}
			// UTC_TIMESTAMP ignores the session zone; NOW() would be
			// 13 hours ahead, and parseTime would read DATETIMEs in loc.
			cfg.Params = map[string]string{"time_zone": "'+13:00'"}
			cfg.Loc = time.FixedZone("", -7*3600)
			return cfg.FormatDSN()
		}},
		{"Postgres", dialect.Postgres, "pgx", func(tb testing.TB) string {
			u, err := url.Parse(testdb.Postgres.DSN(tb))
			if err != nil {
				tb.Fatal(err)
			}
			q := u.Query()
			q.Set("timezone", "Pacific/Chatham") // +13:45 in its summer
			u.RawQuery = q.Encode()
			return u.String()
		}},
	}
	for _, z := range zoned {
		t.Run(z.name, func(t *testing.T) {
			t.Parallel()
			db, err := sql.Open(z.driver, z.dsn(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			s := newStore(t, db, z.dialect, sqldedupe.Config{})
			ref := dedupe.Ref{Group: "g", Key: "k"}
			before := time.Now()
			acquire(t, s, ref, long)
			res := claim(t, s, ref, long)
			after := time.Now()
			// The database runs on this host, so its clock is ours give or
			// take the time the calls took.
			if res.Outcome != dedupe.Busy || res.Until.Before(before.Add(long-time.Second)) || res.Until.After(after.Add(long+time.Second)) {
				t.Errorf("Claim = %v until %v, want in flight until about %v", res.Outcome, res.Until, before.Add(long))
			}
			// The lease ran from the acquire for at most as long as both
			// calls took.
			if res.Remaining > long || res.Remaining < long-time.Second-after.Sub(before) {
				t.Errorf("Claim remaining %v after calls of %v, want about %v", res.Remaining, after.Sub(before), long)
			}
			short := dedupe.Ref{Group: "g", Key: "short"}
			acquire(t, s, short, 100*time.Millisecond)
			time.Sleep(200 * time.Millisecond)
			acquire(t, s, short, long)
		})
	}
}

// TestDeadlineWhileLocked ends a claim's context while the claim waits for a
// row another transaction holds: the error says so, even from a driver that
// reports it in its own words. The server may still apply the claim once the
// row is free (its outcome is unknown), but it holds the key no longer than
// its lease.
func TestDeadlineWhileLocked(t *testing.T) {
	for _, b := range testdb.Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			db := b.OpenWith(t, &testdb.Hooks{Opaque: true})
			s := newStore(t, db, b.Dialect, sqldedupe.Config{})
			ref := dedupe.Ref{Group: "g", Key: "k"}
			// A transaction's claim holds the key's row locked until it
			// ends.
			tx, err := s.BeginTx(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if res, err := s.ClaimTx(t.Context(), tx, dedupe.Item{Ref: ref}, long); err != nil || res.Outcome != dedupe.Acquired {
				t.Fatalf("ClaimTx = %v, %v; want acquired", res.Outcome, err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			const lease = 100 * time.Millisecond
			_, err = testkit.Claim(ctx, s, dedupe.Item{Ref: ref}, lease)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Claim of a locked key past its deadline = %v, want DeadlineExceeded", err)
			}
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * lease)
			acquire(t, s, ref, long)
		})
	}
}

func countRows(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM idemq_dedupe").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// expiredAndLive records 7 keys whose lease or retention ends at once and 5
// live ones, and returns the live ones' refs with what a claim answers.
func expiredAndLive(t *testing.T, s *sqldedupe.Store) map[dedupe.Ref]dedupe.Outcome {
	t.Helper()
	const short = 20 * time.Millisecond
	for i := range 4 {
		acquire(t, s, dedupe.Ref{Group: "expired", Key: fmt.Sprint("lease", i)}, short)
	}
	for i := range 3 {
		tk := acquire(t, s, dedupe.Ref{Group: "expired", Key: fmt.Sprint("done", i)}, long)
		if err := testkit.Complete(t.Context(), s, tk, short); err != nil {
			t.Fatal(err)
		}
	}
	live := map[dedupe.Ref]dedupe.Outcome{}
	for i := range 3 {
		r := dedupe.Ref{Group: "live", Key: fmt.Sprint("lease", i)}
		acquire(t, s, r, long)
		live[r] = dedupe.Busy
	}
	for i := range 2 {
		r := dedupe.Ref{Group: "live", Key: fmt.Sprint("done", i)}
		if err := testkit.Complete(t.Context(), s, acquire(t, s, r, long), long); err != nil {
			t.Fatal(err)
		}
		live[r] = dedupe.Suppressed
	}
	time.Sleep(2 * short)
	return live
}

func checkLive(t *testing.T, s *sqldedupe.Store, live map[dedupe.Ref]dedupe.Outcome) {
	t.Helper()
	for r, want := range live {
		if res := claim(t, s, r, long); res.Outcome != want {
			t.Errorf("Claim(%q) after cleanup = %v, want %v", r, res.Outcome, want)
		}
	}
}

// TestCleanup deletes the expired records and keeps the live ones, by
// Cleanup in batches, and in the background.
func TestCleanup(t *testing.T) {
	for _, b := range testdb.Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			db := b.Open(t)
			s := newStore(t, db, b.Dialect, sqldedupe.Config{CleanupInterval: -1, CleanupBatch: 3})
			live := expiredAndLive(t, s)
			for i, want := range []int64{3, 3, 1, 0} {
				n, err := s.Cleanup(t.Context())
				if err != nil || n != want {
					t.Fatalf("Cleanup %d = %d, %v; want %d", i, n, err, want)
				}
			}
			if n := countRows(t, db); n != len(live) {
				t.Errorf("%d rows after cleanup, want the %d live ones", n, len(live))
			}
			checkLive(t, s, live)

			db = b.Open(t)
			s = newStore(t, db, b.Dialect, sqldedupe.Config{CleanupInterval: 10 * time.Millisecond, CleanupBatch: 2})
			live = expiredAndLive(t, s)
			testkit.WaitFor(t, fmt.Sprintf("background cleanup down to %d rows", len(live)), func() bool { return countRows(t, db) <= len(live) })
			checkLive(t, s, live)
		})
	}
}

// TestCleanupLogsErrors checks that the background cleanup reports what it
// cannot return: here, a table nobody created.
func TestCleanupLogsErrors(t *testing.T) {
	db := testdb.SQLite.Open(t)
	logs := new(testkit.Logs)
	s, err := sqldedupe.New(db, dialect.SQLite, sqldedupe.Config{
		Table: "never_migrated", CleanupInterval: time.Millisecond, Logger: slog.New(logs),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	testkit.WaitFor(t, "a cleanup error logged", func() bool { return len(logs.Records()) > 0 })
	r := logs.Records()[0]
	var msg string
	r.Attrs(func(a slog.Attr) bool {
		msg += a.Value.String()
		return true
	})
	if r.Level != slog.LevelWarn || !strings.Contains(msg, "never_migrated") {
		t.Errorf("logged %v %q %s, want a warning naming the table", r.Level, r.Message, msg)
	}
}

// TestClose checks that Close stops the cleanup goroutine and waits for it,
// leaves the *sql.DB open, and that the Store still answers afterwards.
func TestClose(t *testing.T) {
	db := testdb.SQLite.Open(t)
	if err := db.PingContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s, err := sqldedupe.New(db, dialect.SQLite, sqldedupe.Config{CleanupInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	ref := dedupe.Ref{Group: "g", Key: "k"}
	acquire(t, s, ref, time.Millisecond)
	time.Sleep(20 * time.Millisecond) // some cleanup rounds run
	for range 2 {
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	if err := db.PingContext(t.Context()); err != nil {
		t.Fatalf("db after Close: %v", err)
	}
	acquire(t, s, ref, long)
	if res := claim(t, s, ref, long); res.Outcome != dedupe.Busy {
		t.Errorf("Claim after Close = %v, want in flight", res.Outcome)
	}
}
