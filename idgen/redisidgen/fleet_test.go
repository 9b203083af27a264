package redisidgen_test

// Fleet tests: generators in separate OS processes (this test binary run
// again as a child) lease node ids from one real Redis, while the parent
// kills, stops and restarts things. Every ID a child issues is written to a
// file; an ID it issued but did not write was never used by anyone, so the
// files are what must hold no duplicates.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/redisidgen"
	"github.com/idemq/idemq/internal/fleettest"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
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

// redisFleet is a fleet over the Redis at addr.
type redisFleet struct {
	*fleettest.Fleet
	t    *testing.T
	addr string
}

func newFleet(t *testing.T, redisAddr string, size int64, lease time.Duration) *redisFleet {
	t.Helper()
	return &redisFleet{fleettest.New(t, size, lease, map[string]string{"REDIS": redisAddr}), t, redisAddr}
}

// create makes the pool new, so that the first lease need not wait out the
// lost-data fence.
func (f *redisFleet) create() {
	f.t.Helper()
	client := redis.NewClient(&redis.Options{Addr: f.addr})
	defer client.Close()
	p := f.Pool()
	l, err := redisidgen.New(client, redisidgen.Config{Pool: p.Name, Size: p.Size, Lease: p.Lease})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := l.Create(context.Background()); err != nil {
		f.t.Fatal(err)
	}
}

// N processes race for M < N node ids: exactly M hold one, the others fail
// at start with ErrNoFreeNode.
func TestFleetRaceForNodes(t *testing.T) {
	f := newFleet(t, testenv.Redis(t), 3, 10*time.Second)
	f.create()
	fleettest.RaceForNodes(t, f.Fleet)
}

// kill -9 a holder: its node is granted again only after its lease, and
// the new holder's IDs are all greater than every ID the old one issued.
func TestFleetKilledHolder(t *testing.T) {
	const lease = 2 * time.Second
	f := newFleet(t, testenv.Redis(t), 1, lease)
	f.create()
	fleettest.KilledHolder(t, f.Fleet, lease)
}

// SIGSTOP a holder past its lease, let another process take the node,
// SIGCONT: the stopped one issues nothing until it holds a lease again.
func TestFleetStoppedHolder(t *testing.T) {
	const lease = 5 * time.Second
	f := newFleet(t, testenv.Redis(t), 1, lease)
	f.create()
	a := f.Start(t, 0, true)
	if l := a.Await(t, 30*time.Second); l != "node 0" {
		t.Fatalf("first holder said %q", l)
	}
	// Each holder has issued before the other goes on: a fixed pause
	// proves nothing on a loaded machine, where a child that said "node 0"
	// was seen to stall past half a lease and write no ID.
	a.AwaitIDs(t)
	a.Pause(t)
	time.Sleep(lease + lease/2)
	b := f.Start(t, 0, true)
	if l := b.Await(t, 30*time.Second); l != "node 0" {
		t.Fatalf("next holder said %q", l)
	}
	b.AwaitIDs(t)
	// The pool is full only while the new holder renews in time; the
	// lease is long against a loaded machine's pauses (over 2 s were
	// measured at load 40) so that it does.
	logged := len(a.Stderr()) // it is stopped
	leasedAgain := func() {
		t.Helper()
		if n, d := fleettest.Duplicates(a.IDs(t), b.IDs(t)); d != 0 {
			t.Errorf("%d of %d IDs issued twice", d, n)
		}
		t.Fatalf("the resumed holder leased node 0 again while the new holder should hold it: the new holder stalled past its lease of %v, or the pool let a second holder in", lease)
	}
	a.Resume(t)
	said := ""
	testkit.WaitFor(t, "the resumed holder to be refused", func() bool {
		said, _ = a.Said()
		return said != "" || a.LeasedAgain(logged)
	})
	if said == "" {
		a.Finish(t)
		b.Finish(t)
		leasedAgain()
	}
	if said != "fenced" {
		t.Fatalf("resumed holder said %q, want fenced", said)
	}
	time.Sleep(lease) // it retries to lease, and fails: the pool is full
	a.Finish(t)
	b.Finish(t)
	if a.LeasedAgain(logged) {
		leasedAgain()
	}
	stopped, next := a.IDs(t), b.IDs(t)
	if n, d := fleettest.Duplicates(stopped, next); d != 0 {
		t.Fatalf("%d of %d IDs issued twice", d, n)
	}
	_, stoppedMax := fleettest.Bounds(stopped)
	nextMin, _ := fleettest.Bounds(next)
	if stoppedMax >= nextMin {
		t.Fatalf("the stopped holder issued %d after the new holder's first ID %d", stoppedMax, nextMin)
	}
}

// 8 processes × 1M IDs over a pool of 4 node ids with churn: processes
// exit, are killed and start again, waiting for a free node; no ID is
// issued twice.
func TestFleetChurn(t *testing.T) {
	const (
		slots   = 8
		perSlot = 1_000_000
		perProc = 125_000
	)
	f := newFleet(t, testenv.Redis(t), 4, time.Second)
	f.create()
	var (
		mu   sync.Mutex
		sets [][]uint64
	)
	// Each slot is a parallel subtest, so that it may fail its test.
	t.Run("slots", func(t *testing.T) {
		for s := range slots {
			t.Run(fmt.Sprint(s), func(t *testing.T) {
				t.Parallel()
				for p := 0; p < perSlot/perProc; p++ {
					var c *fleettest.Proc
					if s%4 == 0 && p%3 == 1 {
						// Killed once it has issued IDs under a node: its
						// lease must expire. It issues until killed, as one
						// given a count could finish first (125,000 IDs
						// took less than the 20 ms the test once waited).
						c = f.Start(t, 0, true)
						if l := c.Await(t, time.Minute); !strings.HasPrefix(l, "node ") {
							t.Errorf("child said %q", l)
						}
						c.AwaitIDs(t)
						c.Kill(t)
					} else {
						c = f.Start(t, perProc, true)
						c.Wait(t, time.Minute, nil)
					}
					ids := c.IDs(t)
					mu.Lock()
					sets = append(sets, ids)
					mu.Unlock()
				}
			})
		}
	})
	n, d := fleettest.Duplicates(sets...)
	t.Logf("%d processes issued %d IDs over 4 node ids", len(sets), n)
	if d != 0 {
		t.Fatalf("%d of %d IDs issued twice", d, n)
	}
	if n < slots*perSlot*3/4 {
		t.Fatalf("only %d IDs issued", n)
	}
}

// Bad input at start: a clear error, never a guessed node.
func TestFleetBadStart(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer dead.Close()
	l, err := redisidgen.New(dead, redisidgen.Config{Pool: "dead", Size: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if g, err := idgen.NewLeased(ctx, l, idgen.Config{}, idgen.LeaseConfig{Logger: quiet}); err == nil || g != nil {
		t.Fatalf("NewLeased with Redis unreachable = %v, %v; want an error", g, err)
	} else if !strings.Contains(err.Error(), "127.0.0.1:1") && !strings.Contains(err.Error(), "connect") {
		t.Errorf("error does not say what failed: %v", err)
	}
}

// Redis restarted without persistence mid-run: the holders lose their
// leases and fence themselves, the pool grants nothing for one lease, then
// they lease nodes again — perhaps each other's — and no ID is issued
// twice.
func TestFleetRedisRestart(t *testing.T) {
	const lease = time.Second
	srv := testenv.StartPrivateRedis(t)
	f := newFleet(t, srv.Addr(), 2, lease)
	f.create()
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
