package sqlidgen_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/segment/segmenttest"
	"github.com/idemq/idemq/idgen/sqlidgen"
	"github.com/idemq/idemq/internal/sqldialect"
	"github.com/idemq/idemq/internal/testdb"
)

const ttl = 300 * time.Millisecond

// any0 asks for any free node of a pool of size nodes.
func any0(size int64, owner string) idgen.LeaseRequest {
	return idgen.LeaseRequest{MaxNode: size - 1, Owner: owner}
}

func acquire(t testing.TB, l *sqlidgen.Leaser, req idgen.LeaseRequest) idgen.Lease {
	t.Helper()
	lease, err := l.Acquire(context.Background(), req)
	if err != nil {
		t.Fatalf("Acquire(%+v) = %v", req, err)
	}
	return lease
}

func list(t testing.TB, l *sqlidgen.Leaser) map[int64]sqlidgen.NodeLease {
	t.Helper()
	rows, err := l.List(context.Background())
	if err != nil {
		t.Fatalf("List = %v", err)
	}
	m := map[int64]sqlidgen.NodeLease{}
	for _, r := range rows {
		m[r.Node] = r
	}
	return m
}

func TestNew(t *testing.T) {
	db, err := sql.Open("sqlite", ":memory:") // never connects
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ok := sqlidgen.Config{Pool: "p", Size: 8}
	with := func(f func(*sqlidgen.Config)) sqlidgen.Config {
		c := ok
		f(&c)
		return c
	}
	tests := []struct {
		name    string
		db      *sql.DB
		dialect sqldialect.Dialect
		cfg     sqlidgen.Config
		ok      bool
	}{
		{"Defaults", db, sqldialect.SQLite, ok, true},
		{"MySQL", db, sqldialect.MySQL, ok, true},
		{"Postgres", db, sqldialect.Postgres, ok, true},
		{"Table", db, sqldialect.SQLite, with(func(c *sqlidgen.Config) { c.Table = "Worker_Lease2" }), true},
		{"Pool64", db, sqldialect.SQLite, with(func(c *sqlidgen.Config) { c.Pool = strings.Repeat("p", 64) }), true},
		{"PoolUnicode", db, sqldialect.SQLite, with(func(c *sqlidgen.Config) { c.Pool = "订单" }), true},
		{"Size1", db, sqldialect.SQLite, with(func(c *sqlidgen.Config) { c.Size = 1 }), true},
		{"SizeMax", db, sqldialect.MySQL, with(func(c *sqlidgen.Config) { c.Size = sqlidgen.MaxSize }), true},
		{"Lease1ms", db, sqldialect.SQLite, with(func(c *sqlidgen.Config) { c.Lease = time.Millisecond }), true},
		{"NilDB", nil, sqldialect.SQLite, ok, false},
		{"NoDialect", db, 0, ok, false},
		{"UnknownDialect", db, sqldialect.SQLite + 1, ok, false},
		{"NoPool", db, sqldialect.SQLite, with(func(c *sqlidgen.Config) { c.Pool = "" }), false},
		{"Pool65", db, sqldialect.SQLite, with(func(c *sqlidgen.Config) { c.Pool = strings.Repeat("p", 65) }), false},
		{"PoolNotUTF8", db, sqldialect.SQLite, with(func(c *sqlidgen.Config) { c.Pool = "p\xff" }), false},
		{"NoSize", db, sqldialect.SQLite, with(func(c *sqlidgen.Config) { c.Size = 0 }), false},
		{"NegativeSize", db, sqldialect.SQLite, with(func(c *sqlidgen.Config) { c.Size = -1 }), false},
		{"SizeAboveMax", db, sqldialect.Postgres, with(func(c *sqlidgen.Config) { c.Size = sqlidgen.MaxSize + 1 }), false},
		{"NegativeLease", db, sqldialect.SQLite, with(func(c *sqlidgen.Config) { c.Lease = -time.Second }), false},
		{"LeaseBelow1ms", db, sqldialect.SQLite, with(func(c *sqlidgen.Config) { c.Lease = time.Microsecond }), false},
		{"Table49", db, sqldialect.SQLite, with(func(c *sqlidgen.Config) { c.Table = strings.Repeat("t", 49) }), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sqlidgen.New(tc.db, tc.dialect, tc.cfg)
			if (err == nil) != tc.ok {
				t.Fatalf("New(%v, %+v) = %v, want ok %v", tc.dialect, tc.cfg, err, tc.ok)
			}
			if err != nil && !errors.Is(err, idgen.ErrInvalidConfig) {
				t.Errorf("New error %v does not wrap ErrInvalidConfig", err)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	l, err := sqlidgen.New(&sql.DB{}, sqldialect.SQLite, sqlidgen.Config{Pool: "p", Size: 3})
	if err != nil {
		t.Fatal(err)
	}
	want := sqlidgen.Config{Pool: "p", Size: 3, Lease: 10 * time.Second, Table: "idemq_worker_lease"}
	if got := sqlidgen.LeaserConfig(l); got != want {
		t.Errorf("Config() = %+v, want %+v", got, want)
	}
}

// TestMigrate checks that Migrate can run again, and that pools of one
// table and tables of one database keep apart.
func TestMigrate(t *testing.T) {
	eachBackend(t, testdb.Backends, func(t *testing.T, b testdb.Backend, db *sql.DB) {
		a := newLeaser(t, db, b.Dialect, sqlidgen.Config{Pool: "a", Size: 1})
		if err := a.Migrate(t.Context()); err != nil {
			t.Fatalf("second Migrate: %v", err)
		}
		other := newLeaser(t, db, b.Dialect, sqlidgen.Config{Pool: "b", Size: 1})
		table := newLeaser(t, db, b.Dialect, sqlidgen.Config{Pool: "a", Size: 1, Table: "Other_Table"})
		for _, l := range []*sqlidgen.Leaser{a, other, table} {
			if lease := acquire(t, l, any0(1, "x")); lease.Node != 0 {
				t.Fatalf("%+v: node %d, want 0", sqlidgen.LeaserConfig(l), lease.Node)
			}
		}
		if _, err := a.Acquire(t.Context(), any0(1, "x")); !errors.Is(err, idgen.ErrNoFreeNode) {
			t.Errorf("second Acquire = %v, want ErrNoFreeNode", err)
		}
	})
}

// TestList checks what operators see: held, released and expired rows, on
// the database's clock, with owners cut to their column.
func TestList(t *testing.T) {
	eachBackend(t, testdb.Backends, func(t *testing.T, b testdb.Backend, db *sql.DB) {
		// The leases the test counts on holding last an hour, so
		// that no stall of a loaded machine ends one (300ms ones were
		// lost at load 40: 6 of 40 runs failed); only the ones it
		// waits to see end last ttl. The lease is the leaser's, not
		// the pool's.
		const hour = time.Hour
		l := newLeaser(t, db, b.Dialect, sqlidgen.Config{Pool: "list", Size: 4, Lease: hour})
		short := newLeaser(t, db, b.Dialect, sqlidgen.Config{Pool: "list", Size: 4, Lease: ttl})
		if rows, err := l.List(t.Context()); err != nil || len(rows) != 0 {
			t.Fatalf("List of an unused pool = %v, %v", rows, err)
		}
		long := strings.Repeat("é", 200) // 400 bytes
		ended := acquire(t, short, any0(4, long))
		released := acquire(t, l, any0(4, "released"))
		if err := l.Release(t.Context(), released, time.Unix(1_700_000_000, 0)); err != nil {
			t.Fatal(err)
		}
		expired := acquire(t, short, any0(4, "bad \xff utf-8"))
		time.Sleep(ttl * 3 / 2)
		if renewed, err := short.Renew(t.Context(), ended, time.UnixMicro(1_700_000_000_000_001)); err == nil {
			t.Fatalf("Renew of an expired lease = %+v", renewed)
		}
		held := acquire(t, l, idgen.LeaseRequest{MaxNode: 3, Static: true, Node: ended.Node, Owner: long})
		time.Sleep(10 * time.Millisecond)
		held, err := l.Renew(t.Context(), held, time.UnixMicro(1_700_000_000_000_001))
		if err != nil {
			t.Fatal(err)
		}

		rows := list(t, l)
		if len(rows) != 3 {
			t.Fatalf("List = %+v, want 3 rows", rows)
		}
		h := rows[held.Node]
		if !h.Held || h.Remaining <= 0 || h.Remaining > hour || !h.Freed.IsZero() {
			t.Errorf("held row = %+v", h)
		}
		if h.Owner != strings.Repeat("é", 127) {
			t.Errorf("long owner stored as %d bytes %q, want 254 bytes", len(h.Owner), h.Owner)
		}
		if !h.HighWater.Equal(time.UnixMicro(1_700_000_000_000_001)) {
			t.Errorf("held row's mark = %v", h.HighWater)
		}
		if d := h.Expires.Sub(h.Granted); d <= hour {
			t.Errorf("renewed lease runs %v from its grant, want more than %v", d, hour)
		}
		r := rows[released.Node]
		if r.Held || r.Remaining != 0 || r.Freed.IsZero() || !r.Freed.Equal(r.Expires) || r.Owner != "released" {
			t.Errorf("released row = %+v", r)
		}
		if !r.HighWater.Equal(time.Unix(1_700_000_000, 0)) {
			t.Errorf("released row's mark = %v", r.HighWater)
		}
		e := rows[expired.Node]
		if e.Held || !e.Freed.IsZero() || e.Expires.Sub(e.Granted) != ttl || !e.HighWater.IsZero() {
			t.Errorf("expired row = %+v", e)
		}
		if e.Owner != "bad \uFFFD utf-8" {
			t.Errorf("owner with bad UTF-8 stored as %q", e.Owner)
		}
		// The database's clock: the row's times are near ours, whatever
		// its session's time zone.
		if d := time.Since(h.Granted); d < 0 || d > time.Minute {
			t.Errorf("granted %v ago by our clock", d)
		}
	})
}

// TestHighWaterRounding checks that a mark between microseconds is stored
// rounded up, never below the true mark.
func TestHighWaterRounding(t *testing.T) {
	for _, b := range testdb.Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			l := newLeaser(t, b.Open(t), b.Dialect, sqlidgen.Config{Pool: "round", Size: 1})
			lease := acquire(t, l, any0(1, ""))
			mark := time.Unix(1_700_000_000, 1) // 1ns past a µs
			lease, err := l.Renew(t.Context(), lease, mark)
			if err != nil {
				t.Fatal(err)
			}
			if want := time.Unix(1_700_000_000, 1000); !lease.HighWater.Equal(want) {
				t.Errorf("HighWater = %v, want %v", lease.HighWater, want)
			}
			lease, err = l.Renew(t.Context(), lease, time.Unix(-5, 0)) // before 1970: no mark
			if err != nil {
				t.Fatal(err)
			}
			if lease.HighWater.Before(mark) {
				t.Errorf("HighWater lowered to %v", lease.HighWater)
			}
		})
	}
}

// TestMaxSize checks that a pool of MaxSize node ids gets a row for each,
// and that a larger one is refused with an error that names WorkerNodes.
// SQLite is left out: its rows come from a recursive CTE with nothing that
// depends on the size, and 65536 of them take the race-instrumented pure-Go
// SQLite many seconds.
func TestMaxSize(t *testing.T) {
	_, err := sqlidgen.New(&sql.DB{}, sqldialect.SQLite, sqlidgen.Config{Pool: "p", Size: 1 << 22})
	if !errors.Is(err, idgen.ErrInvalidConfig) || !strings.Contains(err.Error(), "WorkerNodes") {
		t.Errorf("New with Size 1<<22 = %v, want ErrInvalidConfig naming WorkerNodes", err)
	}
	for _, b := range testdb.Backends {
		if b.Dialect == sqldialect.SQLite {
			continue
		}
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			db := b.Open(t)
			size := sqlidgen.MaxSize
			l := newLeaser(t, db, b.Dialect, sqlidgen.Config{Pool: "max", Size: size})
			if n := acquire(t, l, any0(size, "first")).Node; n != 0 {
				t.Errorf("first Acquire granted node %d, want 0", n)
			}
			top := acquire(t, l, idgen.LeaseRequest{MaxNode: size - 1, Static: true, Node: size - 1, Owner: "top"})
			if !top.HighWater.IsZero() {
				t.Errorf("never-used top node has HighWater %v", top.HighWater)
			}
			if n := acquire(t, l, any0(size, "second")).Node; n != 1 {
				t.Errorf("second Acquire granted node %d, want 1", n)
			}
			var count, lo, hi int64
			err := db.QueryRowContext(t.Context(), "SELECT COUNT(*), MIN(node), MAX(node) FROM idemq_worker_lease WHERE pool = 'max'").Scan(&count, &lo, &hi)
			if err != nil {
				t.Fatal(err)
			}
			if count != size || lo != 0 || hi != size-1 {
				t.Errorf("pool has %d rows, nodes %d to %d; want %d rows, 0 to %d", count, lo, hi, size, size-1)
			}
			if rows := list(t, l); len(rows) != 3 {
				t.Errorf("List = %d rows, want the 3 nodes leased", len(rows))
			}
		})
	}
}

// TestStaticAheadOfNeverUsed checks that dynamic acquires pass over static
// nodes taken above never-used ones, whether the static node's row was
// there when it was taken or not, and take the never-used ones in order;
// that the static nodes, released, join the tail of the queue; and that a
// pool whose rows were deleted is filled again.
func TestStaticAheadOfNeverUsed(t *testing.T) {
	const size = 6
	eachBackend(t, testdb.Backends, func(t *testing.T, b testdb.Backend, db *sql.DB) {
		cfg := sqlidgen.Config{Pool: "static", Size: size}
		a := newLeaser(t, db, b.Dialect, cfg)
		static := func(l *sqlidgen.Leaser, node int64) idgen.Lease {
			t.Helper()
			lease := acquire(t, l, idgen.LeaseRequest{MaxNode: size - 1, Static: true, Node: node, Owner: "static"})
			if lease.Node != node || !lease.HighWater.IsZero() {
				t.Fatalf("static Acquire of never-used node %d = %+v", node, lease)
			}
			return lease
		}
		dynamic := func(l *sqlidgen.Leaser, want ...int64) {
			t.Helper()
			for _, w := range want {
				if got := acquire(t, l, any0(size, "dynamic")); got.Node != w {
					t.Fatalf("dynamic Acquire granted node %d, want %d", got.Node, w)
				}
			}
		}
		// The pool has no rows yet.
		three := static(a, 3)
		one := static(a, 1)
		dynamic(a, 0)
		// Now every node has a row; another process takes never-used
		// node 4.
		other := newLeaser(t, db, b.Dialect, cfg)
		four := static(other, 4)
		dynamic(other, 2, 5)
		if _, err := a.Acquire(t.Context(), any0(size, "dynamic")); !errors.Is(err, idgen.ErrNoFreeNode) {
			t.Fatalf("Acquire of a full pool = %v, want ErrNoFreeNode", err)
		}
		for _, l := range []idgen.Lease{four, one, three} {
			if err := a.Release(t.Context(), l, time.Time{}); err != nil {
				t.Fatal(err)
			}
		}
		dynamic(a, 4, 1, 3)

		if _, err := db.ExecContext(t.Context(), "DELETE FROM idemq_worker_lease WHERE pool = 'static'"); err != nil {
			t.Fatal(err)
		}
		dynamic(a, 0, 1)
	})
}

// TestShrunkPool checks that nodes left above a pool's new size are never
// granted again, and that a larger pool uses its new ids first.
func TestShrunkPool(t *testing.T) {
	eachBackend(t, testdb.Backends, func(t *testing.T, b testdb.Backend, db *sql.DB) {
		big := newLeaser(t, db, b.Dialect, sqlidgen.Config{Pool: "p", Size: 4})
		var leases []idgen.Lease
		for range 4 {
			leases = append(leases, acquire(t, big, any0(4, "big")))
		}
		for _, l := range leases {
			if err := big.Release(t.Context(), l, time.Time{}); err != nil {
				t.Fatal(err)
			}
		}
		small := newLeaser(t, db, b.Dialect, sqlidgen.Config{Pool: "p", Size: 2})
		got := map[int64]bool{}
		for range 2 {
			got[acquire(t, small, any0(2, "small")).Node] = true
		}
		if !got[0] || !got[1] {
			t.Errorf("pool shrunk to 2 granted %v", got)
		}
		if _, err := small.Acquire(t.Context(), any0(2, "small")); !errors.Is(err, idgen.ErrNoFreeNode) {
			t.Errorf("third Acquire of the shrunk pool = %v, want ErrNoFreeNode", err)
		}
		grown := newLeaser(t, db, b.Dialect, sqlidgen.Config{Pool: "p", Size: 6})
		if n := acquire(t, grown, any0(6, "grown")).Node; n != 4 {
			t.Errorf("grown pool granted node %d first, want never-used 4", n)
		}
	})
}

// TestUnreachable checks that a database that cannot be reached at start
// gives a prompt error that names the pool, wraps no sentinel, and that a
// generator could not mistake for a full pool; and that Segments' calls
// fail as segmenttest.Unreachable wants, naming the server's address.
func TestUnreachable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dialect sqldialect.Dialect
		driver  string
		dsn     string
		addr    string // of the server, "" for none
	}{
		{"MySQL", sqldialect.MySQL, "mysql", "root@tcp(127.0.0.1:1)/idemq?timeout=2s", "127.0.0.1:1"},
		{"Postgres", sqldialect.Postgres, "pgx", "postgres://postgres@127.0.0.1:1/idemq?sslmode=disable&connect_timeout=2", "127.0.0.1:1"},
		{"SQLite", sqldialect.SQLite, "sqlite", "file:" + t.TempDir() + "/missing/dir/ids.db", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db, err := sql.Open(tc.driver, tc.dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			l, err := sqlidgen.New(db, tc.dialect, sqlidgen.Config{Pool: "orders", Size: 8})
			if err != nil {
				t.Fatalf("New touched the database: %v", err)
			}
			start := time.Now()
			_, err = l.Acquire(t.Context(), any0(8, "me"))
			if err == nil {
				t.Fatal("Acquire on an unreachable database succeeded")
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("Acquire took %v to fail", d)
			}
			for _, s := range []error{idgen.ErrNoFreeNode, idgen.ErrLeaseLost, idgen.ErrInvalidConfig} {
				if errors.Is(err, s) {
					t.Errorf("error %v wraps %v", err, s)
				}
			}
			if !strings.Contains(err.Error(), `sqlidgen: acquire a node of pool "orders"`) {
				t.Errorf("error %q does not say what failed", err)
			}
			t.Logf("Acquire: %v", err)
			if err := l.Migrate(t.Context()); err == nil || !strings.Contains(err.Error(), "sqlidgen: migrate idemq_worker_lease") {
				t.Errorf("Migrate = %v", err)
			}
			w, err := sqlidgen.NewWorkerNodes(db, tc.dialect, "")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Acquire(t.Context(), any0(8, "me")); err == nil || !strings.Contains(err.Error(), "sqlidgen: record a start in idemq_worker_node") {
				t.Errorf("WorkerNodes.Acquire = %v", err)
			}
			if tc.addr != "" {
				s, err := sqlidgen.NewSegments(db, tc.dialect, "")
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				segmenttest.Unreachable(t, s, tc.addr)
			}
		})
	}
}

// TestLostAnswer loses the answer to the statement that grants a node,
// after the database ran it: while the caller waits, Acquire returns the
// node granted under its token; once the caller has gone, it gives the node
// back. Either way no node stays held by nobody.
func TestLostAnswer(t *testing.T) {
	errLost := errors.New("connection reset by peer")
	for _, b := range testdb.Backends {
		for _, tc := range []struct {
			name string
			// used makes the pool's only node used and free, so that
			// Acquire takes it over instead of its never-used row.
			used bool
			// cancel cancels the caller's context with the lost answer.
			cancel bool
		}{
			{"NeverUsed", false, false},
			{"Used", true, false},
			{"NeverUsedCallerGone", false, true},
			{"UsedCallerGone", true, true},
		} {
			t.Run(b.Name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				var (
					armed  atomic.Bool
					cancel context.CancelFunc
				)
				db := b.OpenWith(t, &testdb.Hooks{Statement: func(query string) func() error {
					// A dynamic Acquire grants a node by an UPDATE,
					// whether it was used or never used.
					if !strings.HasPrefix(query, "UPDATE") || !armed.CompareAndSwap(true, false) {
						return nil
					}
					return func() error {
						if tc.cancel {
							cancel()
						}
						return errLost
					}
				}})
				cfg := sqlidgen.Config{Pool: "lost", Size: 1}
				l := newLeaser(t, db, b.Dialect, cfg)
				if tc.used {
					if err := l.Release(t.Context(), acquire(t, l, any0(1, "first")), time.Unix(1_700_000_000, 0)); err != nil {
						t.Fatal(err)
					}
				}
				ctx, c := context.WithCancel(t.Context())
				defer c()
				cancel = c
				armed.Store(true)
				lease, err := l.Acquire(ctx, any0(1, "lost"))
				if armed.Load() {
					t.Fatal("no answer was lost")
				}
				held := list(t, l)[0].Held
				if tc.cancel {
					if !errors.Is(err, context.Canceled) || !errors.Is(err, errLost) {
						t.Errorf("Acquire = %v, want the lost answer and the cancellation", err)
					}
					if held {
						t.Errorf("node 0 stays held after its caller went")
					}
					return
				}
				if err != nil {
					t.Fatalf("Acquire = %v, want the node granted before the answer was lost", err)
				}
				if !held || lease.Node != 0 || lease.TTL != sqlidgen.DefaultLease {
					t.Errorf("Acquire = %+v, node held %v", lease, held)
				}
				if tc.used && !lease.HighWater.Equal(time.Unix(1_700_000_000, 0)) {
					t.Errorf("HighWater = %v", lease.HighWater)
				}
				if err := l.Release(t.Context(), lease, time.Time{}); err != nil {
					t.Errorf("Release of the recovered lease = %v", err)
				}
			})
		}
	}
}

// TestStaticAnsweredLate has a static Acquire stall for longer than its
// lease after the database granted the node: the grant is the caller's,
// ended, not a node another holds. (MySQL reads the outcome of its static
// grant with a second statement; it said "held by a live lease" when the
// lease had ended before that read, which TestList met at load 40.)
func TestStaticAnsweredLate(t *testing.T) {
	const lease = 20 * time.Millisecond
	for _, b := range testdb.Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			var stall atomic.Bool
			db := b.OpenWith(t, &testdb.Hooks{Statement: func(query string) func() error {
				if !strings.HasPrefix(query, "INSERT") || !stall.CompareAndSwap(true, false) {
					return nil
				}
				return func() error {
					time.Sleep(5 * lease)
					return nil
				}
			}})
			l := newLeaser(t, db, b.Dialect, sqlidgen.Config{Pool: "late", Size: 2, Lease: lease})
			stall.Store(true)
			got, err := l.Acquire(t.Context(), idgen.LeaseRequest{MaxNode: 1, Static: true, Node: 1})
			if stall.Load() {
				t.Fatal("the static grant did not stall")
			}
			if err != nil || got.Node != 1 {
				t.Fatalf("Acquire of static node 1, answered after its lease = %+v, %v; want node 1", got, err)
			}
		})
	}
}

// TestMigrateAddsFreeSeq turns a pool's table into one of an earlier
// version, without the free_seq column that orders releases within one
// tick of the database's clock, and checks that Migrate adds it to the
// table and its rows, that the leases granted before keep working, and
// that releases made back to back come out of the free queue in order.
func TestMigrateAddsFreeSeq(t *testing.T) {
	const table = "legacy_lease"
	legacy := map[sqldialect.Dialect][]string{
		sqldialect.SQLite: {
			`DROP INDEX "legacy_lease_free"`,
			`ALTER TABLE "legacy_lease" DROP COLUMN free_seq`,
			`CREATE INDEX "legacy_lease_free" ON "legacy_lease" (pool, expires_at, node)`,
		},
		sqldialect.MySQL: {
			"ALTER TABLE `legacy_lease` DROP INDEX `legacy_lease_free`, DROP COLUMN free_seq, ADD KEY `legacy_lease_free` (pool, expires_at, node)",
		},
		sqldialect.Postgres: {
			`ALTER TABLE "legacy_lease" DROP COLUMN free_seq`,
			`CREATE INDEX "legacy_lease_free" ON "legacy_lease" (pool, expires_at, node)`,
		},
	}
	eachBackend(t, testdb.Backends, func(t *testing.T, b testdb.Backend, db *sql.DB) {
		cfg := sqlidgen.Config{Pool: "legacy", Size: 4, Table: table}
		l := newLeaser(t, db, b.Dialect, cfg)
		var held []idgen.Lease
		for range 3 {
			held = append(held, acquire(t, l, any0(4, "before")))
		}
		for _, stmt := range legacy[b.Dialect] {
			if _, err := db.ExecContext(t.Context(), stmt); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
		for range 2 { // the second finds the column there
			if err := l.Migrate(t.Context()); err != nil {
				t.Fatalf("Migrate of the earlier table: %v", err)
			}
		}
		if _, err := l.Renew(t.Context(), held[2], time.Time{}); err != nil {
			t.Fatalf("Renew of a lease granted before the migration: %v", err)
		}
		for _, i := range []int{1, 0, 2} {
			if err := l.Release(t.Context(), held[i], time.Time{}); err != nil {
				t.Fatal(err)
			}
		}
		want := []int64{3, held[1].Node, held[0].Node, held[2].Node}
		for _, w := range want {
			if got := acquire(t, l, any0(4, "after")); got.Node != w {
				t.Fatalf("after the migration the free queue granted node %d, want %d (queue %v)", got.Node, w, want)
			}
		}
	})
}
