package sqlidgen_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/sqlidgen"
	"github.com/idemq/idemq/internal/sqldialect"
	"github.com/idemq/idemq/internal/testdb"
)

func newWorkerNodes(tb testing.TB, db *sql.DB, d sqldialect.Dialect, table string) *sqlidgen.WorkerNodes {
	tb.Helper()
	w, err := sqlidgen.NewWorkerNodes(db, d, table)
	if err != nil {
		tb.Fatal(err)
	}
	if err := w.Migrate(context.Background()); err != nil {
		tb.Fatal(err)
	}
	if err := w.Migrate(context.Background()); err != nil {
		tb.Fatalf("second Migrate: %v", err)
	}
	return w
}

// TestNewStores checks what NewWorkerNodes and NewSegments take, what
// they refuse with ErrInvalidConfig, and their defaults.
func TestNewStores(t *testing.T) {
	db, err := sql.Open("sqlite", ":memory:") // never connects
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	constructors := map[string]func(*sql.DB, sqldialect.Dialect, string) error{
		"NewWorkerNodes": func(db *sql.DB, d sqldialect.Dialect, table string) error {
			_, err := sqlidgen.NewWorkerNodes(db, d, table)
			return err
		},
		"NewSegments": func(db *sql.DB, d sqldialect.Dialect, table string) error {
			_, err := sqlidgen.NewSegments(db, d, table)
			return err
		},
	}
	for _, tc := range []struct {
		name    string
		db      *sql.DB
		dialect sqldialect.Dialect
		table   string
		ok      bool
	}{
		{"Defaults", db, sqldialect.SQLite, "", true},
		{"UIDGeneratorTable", db, sqldialect.MySQL, "WORKER_NODE", true},
		{"Postgres", db, sqldialect.Postgres, "", true},
		{"NilDB", nil, sqldialect.SQLite, "", false},
		{"NoDialect", db, 0, "", false},
		{"UnknownDialect", db, sqldialect.Dialect(9), "", false},
		{"BadTable", db, sqldialect.SQLite, "a b", false},
		{"Table49", db, sqldialect.SQLite, strings.Repeat("t", 49), false},
	} {
		for name, build := range constructors {
			err := build(tc.db, tc.dialect, tc.table)
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, idgen.ErrInvalidConfig)) {
				t.Errorf("%s: %s(%v, %q) = %v, want ok %v or ErrInvalidConfig", tc.name, name, tc.dialect, tc.table, err, tc.ok)
			}
		}
	}
	w, err := sqlidgen.NewWorkerNodes(db, sqldialect.SQLite, "")
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if got := sqlidgen.WorkerNodesHost(w); got != clipTo(host, 64) || sqlidgen.WorkerNodesTable(w) != "idemq_worker_node" {
		t.Errorf("host %q, table %q; want %q, the default table", got, sqlidgen.WorkerNodesTable(w), host)
	}
	s, err := sqlidgen.NewSegments(db, sqldialect.SQLite, "")
	if err != nil || sqlidgen.SegmentsTable(s) != "idemq_segment" {
		t.Fatalf("NewSegments = %v, table %q; want the default table", err, sqlidgen.SegmentsTable(s))
	}
}

func clipTo(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// workerRow is a row of the table of starts.
type workerRow struct {
	id               int64
	host, port       string
	typ              int
	launch           string
	modified, create string
}

func workerRows(t *testing.T, db *sql.DB, table string) map[int64]workerRow {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), `SELECT id, host_name, port, type, CAST(launch_date AS CHAR(10)), CAST(modified AS CHAR(32)), CAST(created AS CHAR(32)) FROM `+table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	m := map[int64]workerRow{}
	for rows.Next() {
		var r workerRow
		if err := rows.Scan(&r.id, &r.host, &r.port, &r.typ, &r.launch, &r.modified, &r.create); err != nil {
			t.Fatal(err)
		}
		m[r.id] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestWorkerNodes checks uid-generator's mode: a row per start, node = id
// from 1, never granted again, no renewal, and a loud failure naming the fix
// once the ids pass the layout's largest node.
func TestWorkerNodes(t *testing.T) {
	eachBackend(t, testdb.Backends, func(t *testing.T, b testdb.Backend, db *sql.DB) {
		w := newWorkerNodes(t, db, b.Dialect, "")
		const maxNode = 3 // a 2-bit node field
		req := idgen.LeaseRequest{MaxNode: maxNode, Owner: "host-a:4242"}
		var leases []idgen.Lease
		for want := int64(1); want <= maxNode; want++ {
			lease, err := w.Acquire(t.Context(), req)
			if err != nil {
				t.Fatalf("start %d: Acquire = %v", want, err)
			}
			if lease.Node != want || lease.TTL != 0 || !lease.HighWater.IsZero() || lease.Token == "" {
				t.Fatalf("start %d: lease %+v, want node %d for good", want, lease, want)
			}
			leases = append(leases, lease)
		}
		rows := workerRows(t, db, quoteTable(b.Dialect, "idemq_worker_node"))
		host, _ := os.Hostname()
		today := time.Now().UTC().Format(time.DateOnly)
		for id := int64(1); id <= maxNode; id++ {
			r := rows[id]
			if r.host != clipTo(host, 64) || r.port != "host-a:4242" || r.typ != 2 { // uid-generator's ACTUAL
				t.Errorf("row %d = %+v", id, r)
			}
			// The session's date: within a day of UTC's.
			if d, err := time.Parse(time.DateOnly, r.launch); err != nil || d.Sub(time.Now().UTC()).Abs() > 48*time.Hour {
				t.Errorf("row %d launched %q, want about %s", id, r.launch, today)
			}
		}

		// Renewal is a no-op; release only touches the modified time.
		renewed, err := w.Renew(t.Context(), leases[0], time.Now())
		if err != nil || renewed != leases[0] {
			t.Errorf("Renew = %+v, %v; want the lease unchanged", renewed, err)
		}
		time.Sleep(1100 * time.Millisecond) // MySQL's DATETIME counts seconds
		if err := w.Release(t.Context(), leases[0], time.Now()); err != nil {
			t.Errorf("Release = %v", err)
		}
		after := workerRows(t, db, quoteTable(b.Dialect, "idemq_worker_node"))
		if after[1].modified == rows[1].modified || after[1].create != rows[1].create {
			t.Errorf("Release changed row 1 from %+v to %+v, want only a later modified time", rows[1], after[1])
		}

		// The ids have run out for the layout, even after a release.
		_, err = w.Acquire(t.Context(), req)
		if !errors.Is(err, idgen.ErrInvalidConfig) || errors.Is(err, idgen.ErrNoFreeNode) {
			t.Fatalf("Acquire past the layout = %v, want ErrInvalidConfig", err)
		}
		for _, fix := range []string{"more node bits", "empty idemq_worker_node", "every process using its ids has stopped"} {
			if !strings.Contains(err.Error(), fix) {
				t.Errorf("error %q does not name the fix %q", err, fix)
			}
		}
		if _, err := w.Acquire(t.Context(), idgen.LeaseRequest{MaxNode: 1 << 22}); err != nil {
			t.Errorf("Acquire with a wider layout = %v", err)
		}

		// Static nodes and layouts without node bits are refused
		// without recording a start.
		n := len(workerRows(t, db, quoteTable(b.Dialect, "idemq_worker_node")))
		if _, err := w.Acquire(t.Context(), idgen.LeaseRequest{MaxNode: 1 << 22, Static: true, Node: 7}); !errors.Is(err, idgen.ErrInvalidConfig) {
			t.Errorf("static Acquire = %v, want ErrInvalidConfig", err)
		}
		if _, err := w.Acquire(t.Context(), idgen.LeaseRequest{MaxNode: 0}); !errors.Is(err, idgen.ErrInvalidConfig) {
			t.Errorf("Acquire for a layout of one node = %v, want ErrInvalidConfig", err)
		}
		if got := len(workerRows(t, db, quoteTable(b.Dialect, "idemq_worker_node"))); got != n {
			t.Errorf("refused calls recorded %d starts", got-n)
		}
	})
}

// TestWorkerNodesNeverReused checks that ids are not handed out again after
// rows are deleted, only after the counter is reset as the documentation
// says.
func TestWorkerNodesNeverReused(t *testing.T) {
	eachBackend(t, testdb.Backends, func(t *testing.T, b testdb.Backend, db *sql.DB) {
		w := newWorkerNodes(t, db, b.Dialect, "WORKER_NODE")
		table := quoteTable(b.Dialect, "WORKER_NODE")
		req := idgen.LeaseRequest{MaxNode: 1<<22 - 1, Owner: "8080"}
		for range 3 {
			if _, err := w.Acquire(t.Context(), req); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.ExecContext(t.Context(), `DELETE FROM `+table); err != nil {
			t.Fatal(err)
		}
		lease, err := w.Acquire(t.Context(), req)
		if err != nil || lease.Node != 4 {
			t.Fatalf("Acquire after deleting the rows = %+v, %v; want node 4", lease, err)
		}
		if r := workerRows(t, db, table)[4]; r.port != "8080" || r.typ != 2 {
			t.Errorf("row 4 = %+v", r)
		}
		var reset []string
		switch b.Dialect {
		case sqldialect.MySQL:
			reset = []string{`TRUNCATE TABLE ` + table}
		case sqldialect.Postgres:
			reset = []string{`TRUNCATE TABLE ` + table + ` RESTART IDENTITY`}
		default:
			reset = []string{`DELETE FROM ` + table, `DELETE FROM sqlite_sequence WHERE name = 'WORKER_NODE'`}
		}
		for _, stmt := range reset {
			if _, err := db.ExecContext(t.Context(), stmt); err != nil {
				t.Fatal(err)
			}
		}
		if lease, err := w.Acquire(t.Context(), req); err != nil || lease.Node != 1 {
			t.Errorf("Acquire after the documented reset = %+v, %v; want node 1", lease, err)
		}
	})
}

// TestWorkerNodesConcurrent starts many processes at once: each gets an id
// of its own.
func TestWorkerNodesConcurrent(t *testing.T) {
	const starts = 40
	eachBackend(t, testdb.Backends, func(t *testing.T, b testdb.Backend, db *sql.DB) {
		ws := []*sqlidgen.WorkerNodes{
			newWorkerNodes(t, db, b.Dialect, ""),
			newWorkerNodes(t, db, b.Dialect, ""),
		}
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			seen = map[int64]bool{}
		)
		for i := range starts {
			wg.Go(func() {
				lease, err := ws[i%2].Acquire(t.Context(), idgen.LeaseRequest{MaxNode: 1<<22 - 1, Owner: fmt.Sprint("p", i)})
				if err != nil {
					t.Errorf("Acquire = %v", err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if seen[lease.Node] {
					t.Errorf("node %d granted twice", lease.Node)
				}
				seen[lease.Node] = true
			})
		}
		wg.Wait()
		for id := int64(1); id <= starts; id++ {
			if !seen[id] {
				t.Errorf("ids 1 to %d not all granted: %v", starts, seen)
				break
			}
		}
	})
}

func quoteTable(d sqldialect.Dialect, table string) string {
	if d == sqldialect.MySQL {
		return "`" + table + "`"
	}
	return `"` + table + `"`
}
