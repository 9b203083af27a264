package sqlidgen_test

// Fleet tests: generators in separate OS processes (this test binary run
// again as a child) lease node ids from one real database, while the
// parent kills them. Every ID a child issues is written to a file; an ID it
// issued but did not write was never used by anyone, so the files are what
// must hold no duplicates.

import (
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/sqlidgen"
	"github.com/idemq/idemq/internal/fleettest"
	"github.com/idemq/idemq/internal/testdb"
)

// fleetBackends are the servers fleets run against: each process has its
// own connections, as separate hosts would.
// MySQL is MariaDB (testenv.MySQL).
var fleetBackends = []testdb.Backend{testdb.Postgres, testdb.MySQL}

// newChildLeaser is a child's Leaser over the database at DSN, of the
// backend named BACKEND.
func newChildLeaser(p fleettest.Pool, env map[string]string) (idgen.Leaser, func(), error) {
	db, b, err := testdb.OpenNamed(env["BACKEND"], env["DSN"])
	if err != nil {
		return nil, nil, err
	}
	l, err := sqlidgen.New(db, b.Dialect, sqlidgen.Config{Pool: p.Name, Size: p.Size, Lease: p.Lease})
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return l, func() { db.Close() }, nil
}

// newFleet returns a fleet over a fresh database of b, its table migrated.
func newFleet(t *testing.T, b testdb.Backend, size int64, lease time.Duration) *fleettest.Fleet {
	t.Helper()
	dsn := b.DSN(t)
	f := fleettest.New(t, size, lease, map[string]string{"BACKEND": b.Name, "DSN": dsn})
	db := b.OpenDSN(t, dsn)
	p := f.Pool()
	newLeaser(t, db, b.Dialect, sqlidgen.Config{Pool: p.Name, Size: p.Size, Lease: p.Lease})
	return f
}

// N processes race for M < N node ids: exactly M hold one, the others fail
// at start with ErrNoFreeNode.
func TestFleetRaceForNodes(t *testing.T) {
	for _, b := range fleetBackends {
		t.Run(b.Name, func(t *testing.T) { fleettest.RaceForNodes(t, newFleet(t, b, 3, 10*time.Second)) })
	}
}

// kill -9 a holder: its node is granted again only after its lease, and
// the new holder's IDs are all greater than every ID the old one issued.
func TestFleetKilledHolder(t *testing.T) {
	const lease = 2 * time.Second
	for _, b := range fleetBackends {
		t.Run(b.Name, func(t *testing.T) { fleettest.KilledHolder(t, newFleet(t, b, 1, lease), lease) })
	}
}

// SIGSTOP a holder past its lease, let another process take the node,
// SIGCONT: the stopped one issues nothing until it holds a lease again.
func TestFleetStoppedHolder(t *testing.T) {
	const lease = 5 * time.Second
	for _, b := range fleetBackends {
		t.Run(b.Name, func(t *testing.T) { fleettest.StoppedHolder(t, newFleet(t, b, 1, lease), lease) })
	}
}

// 8 processes × 1M IDs over a pool of 4 node ids with churn: processes
// exit, are killed and start again, waiting for a free node; no ID is
// issued twice.
func TestFleetChurn(t *testing.T) {
	for _, b := range fleetBackends {
		t.Run(b.Name, func(t *testing.T) { fleettest.Churn(t, newFleet(t, b, 4, time.Second)) })
	}
}
