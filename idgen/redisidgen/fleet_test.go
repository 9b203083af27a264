package redisidgen_test

// Fleet tests: generators in separate OS processes (this test binary run
// again as a child) lease node ids from one real Redis, while the parent
// kills, stops and restarts things. Every ID a child issues is written to a
// file; an ID it issued but did not write was never used by anyone, so the
// files are what must hold no duplicates.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/redisidgen"
	"github.com/idemq/idemq/internal/fleettest"
	"github.com/idemq/idemq/internal/testenv"
)

// newChildLeaser is a child's Leaser over the Redis at REDIS.
func newChildLeaser(p fleettest.Pool, env map[string]string) (idgen.Leaser, func(), error) {
	client := redis.NewClient(&redis.Options{Addr: env["REDIS"]})
	l, err := redisidgen.New(client, redisidgen.Config{Pool: p.Name, Size: p.Size, Lease: p.Lease})
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	return l, func() { client.Close() }, nil
}

// newFleet returns a fleet over the Redis at addr, its pool created so
// that the first lease need not wait out the lost-data fence.
func newFleet(t *testing.T, addr string, size int64, lease time.Duration) *fleettest.Fleet {
	t.Helper()
	f := fleettest.New(t, size, lease, map[string]string{"REDIS": addr})
	p := f.Pool()
	l := newLeaser(t, newClient(t, addr), redisidgen.Config{Pool: p.Name, Size: p.Size, Lease: p.Lease})
	if err := l.Create(t.Context()); err != nil {
		t.Fatal(err)
	}
	return f
}

// N processes race for M < N node ids: exactly M hold one, the others fail
// at start with ErrNoFreeNode.
func TestFleetRaceForNodes(t *testing.T) {
	fleettest.RaceForNodes(t, newFleet(t, testenv.Redis(t), 3, 10*time.Second))
}

// kill -9 a holder: its node is granted again only after its lease, and
// the new holder's IDs are all greater than every ID the old one issued.
func TestFleetKilledHolder(t *testing.T) {
	const lease = 2 * time.Second
	fleettest.KilledHolder(t, newFleet(t, testenv.Redis(t), 1, lease), lease)
}

// SIGSTOP a holder past its lease, let another process take the node,
// SIGCONT: the stopped one issues nothing until it holds a lease again.
func TestFleetStoppedHolder(t *testing.T) {
	const lease = 5 * time.Second
	fleettest.StoppedHolder(t, newFleet(t, testenv.Redis(t), 1, lease), lease)
}

// 8 processes × 1M IDs over a pool of 4 node ids with churn: processes
// exit, are killed and start again, waiting for a free node; no ID is
// issued twice.
func TestFleetChurn(t *testing.T) {
	fleettest.Churn(t, newFleet(t, testenv.Redis(t), 4, time.Second))
}

// Redis restarted without persistence mid-run: the holders lose their
// leases and fence themselves, the pool grants nothing for one lease, then
// they lease nodes again — perhaps each other's — and no ID is issued
// twice.
func TestFleetRedisRestart(t *testing.T) {
	const lease = time.Second
	srv := testenv.StartPrivateRedis(t)
	f := newFleet(t, srv.Addr(), 2, lease)
	a, b := f.Start(t, 0, true), f.Start(t, 0, true)
	for _, c := range []*fleettest.Proc{a, b} {
		if l := c.Await(t, 30*time.Second); !strings.HasPrefix(l, "node ") {
			t.Fatalf("child said %q", l)
		}
	}
	before := map[*fleettest.Proc]int64{a: a.Node, b: b.Node}
	time.Sleep(lease / 2)
	if err := srv.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	for _, c := range []*fleettest.Proc{a, b} {
		if l := c.Await(t, 10*time.Second); l != "fenced" {
			t.Fatalf("child on node %d said %q after the restart, want fenced", before[c], l)
		}
	}
	// They lease again once the pool's fence has passed, and go on.
	time.Sleep(3 * lease)
	a.Finish(t)
	b.Finish(t)
	ia, ib := a.IDs(t), b.IDs(t)
	if n, d := fleettest.Duplicates(ia, ib); d != 0 {
		t.Fatalf("%d of %d IDs issued twice", d, n)
	}
	fenceEnd, err := idgen.Twitter.Compose(restarted.Add(lease), 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ids := range [][]uint64{ia, ib} {
		if _, hi := fleettest.Bounds(ids); hi < uint64(fenceEnd) {
			t.Fatalf("a holder issued nothing after the pool's fence (last ID %d)", hi)
		}
	}
}
