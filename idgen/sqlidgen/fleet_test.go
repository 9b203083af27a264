package sqlidgen_test

// Fleet tests: generators in separate OS processes (this test binary run
// again as a child) lease node ids from one real database, while the
// parent kills them. Every ID a child issues is written to a file; an ID it
// issued but did not write was never used by anyone, so the files are what
// must hold no duplicates.

import (
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/sqlidgen"
	"github.com/idemq/idemq/internal/fleettest"
)

func init() {
	if fleettest.IsChild() {
		os.Exit(fleettest.Child(newChildLeaser))
	}
}

// fleetBackends are the servers fleets run against: each process has its
// own connections, as separate hosts would.
// MySQL is MariaDB (testenv.MySQL).
var fleetBackends = []backend{backendNamed("Postgres"), backendNamed("MySQL")}

// backendNamed returns the backend of backends called name, or one with no
// driver.
func backendNamed(name string) backend {
	i := slices.IndexFunc(backends, func(b backend) bool { return b.name == name })
	if i < 0 {
		return backend{name: name}
	}
	return backends[i]
}

// newChildLeaser is a child's Leaser over the database at DSN, of the
// backend named BACKEND.
func newChildLeaser(p fleettest.Pool, getenv func(string) string) (idgen.Leaser, func(), error) {
	b := backendNamed(getenv("BACKEND"))
	if b.driver == "" {
		return nil, nil, fmt.Errorf("no backend %q", b.name)
	}
	db, err := sql.Open(b.driver, getenv("DSN"))
	if err != nil {
		return nil, nil, err
	}
	l, err := sqlidgen.New(db, b.dialect, sqlidgen.Config{Pool: p.Name, Size: p.Size, Lease: p.Lease})
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return l, func() { db.Close() }, nil
}

// newFleet returns a fleet over a fresh database of b, its table migrated.
func newFleet(t *testing.T, b backend, size int64, lease time.Duration) *fleettest.Fleet {
	t.Helper()
	dsn := b.dsn(t)
	f := fleettest.New(t, size, lease, map[string]string{"BACKEND": b.name, "DSN": dsn})
	db, err := sql.Open(b.driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p := f.Pool()
	newLeaser(t, db, b.dialect, sqlidgen.Config{Pool: p.Name, Size: p.Size, Lease: p.Lease})
	return f
}

// N processes race for M < N node ids: exactly M hold one, the others fail
// at start with ErrNoFreeNode.
func TestFleetRaceForNodes(t *testing.T) {
	for _, b := range fleetBackends {
		t.Run(b.name, func(t *testing.T) {
			f := newFleet(t, b, 3, 2*time.Second)
			var kids []*fleettest.Proc
			for range 7 {
				kids = append(kids, f.Start(0, false))
			}
			held := map[int64]bool{}
			refused := 0
			for _, c := range kids {
				switch l := c.Await(t, 30*time.Second); {
				case strings.HasPrefix(l, "node "):
					if held[c.Node] {
						t.Errorf("node %d held by two processes", c.Node)
					}
					held[c.Node] = true
				case l == "":
					if code := c.Wait(t); code != fleettest.ExitNoNode {
						t.Errorf("refused child exited %d, want %d (no free node)", code, fleettest.ExitNoNode)
					}
					refused++
				default:
					t.Errorf("child said %q", l)
				}
			}
			if len(held) != 3 || refused != 4 {
				t.Fatalf("%d processes hold nodes %v and %d were refused; want 3 and 4", len(held), held, refused)
			}
			var sets [][]uint64
			for _, c := range kids {
				if c.Node >= 0 {
					if code := c.Stop(t); code != fleettest.ExitOK {
						t.Errorf("holder exited %d", code)
					}
					sets = append(sets, c.IDs(t))
				}
			}
			if n, d := fleettest.Duplicates(sets...); d != 0 || n == 0 {
				t.Fatalf("%d IDs, %d duplicates", n, d)
			}
		})
	}
}

// kill -9 a holder: its node is granted again only after its lease, and
// the new holder's IDs are all greater than every ID the old one issued.
func TestFleetKilledHolder(t *testing.T) {
	const lease = 2 * time.Second
	for _, b := range fleetBackends {
		t.Run(b.name, func(t *testing.T) {
			f := newFleet(t, b, 1, lease)
			a := f.Start(0, false)
			if l := a.Await(t, 30*time.Second); l != "node 0" {
				t.Fatalf("first holder said %q", l)
			}
			time.Sleep(lease) // a few renewals
			a.Signal(t, syscall.SIGKILL)
			killed := time.Now()
			a.Wait(t)
			next := f.Start(0, true)
			if l := next.Await(t, 30*time.Second); l != "node 0" {
				t.Fatalf("next holder said %q", l)
			}
			// The lease had at least two thirds left at the kill
			// (renewals come every third of it).
			if waited := time.Since(killed); waited < lease/2 {
				t.Fatalf("node granted again %v after its holder was killed, within its %v lease", waited, lease)
			}
			time.Sleep(100 * time.Millisecond)
			next.Stop(t)
			oldIDs, nextIDs := a.IDs(t), next.IDs(t)
			if len(oldIDs) == 0 || len(nextIDs) == 0 {
				t.Fatalf("old holder wrote %d IDs, new holder %d", len(oldIDs), len(nextIDs))
			}
			_, oldMax := fleettest.Bounds(oldIDs)
			nextMin, _ := fleettest.Bounds(nextIDs)
			if nextMin <= oldMax {
				t.Fatalf("new holder's first ID %d is not above the killed holder's last %d", nextMin, oldMax)
			}
		})
	}
}
