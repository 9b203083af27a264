package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/redisidgen"
)

// TestLeasedIDsAndWorkers issues IDs from a leased node through the built
// binary, then lists the pool while a test holds another node, on each
// store.
func TestLeasedIDsAndWorkers(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			testLeasedIDsAndWorkers(t, b)
		})
	}
}

func testLeasedIDsAndWorkers(t *testing.T, b backend) {
	ctx := context.Background()
	storeURL, pool := b.url(t), unique("pool")
	addr, err := parseStore(storeURL)
	if err != nil {
		t.Fatal(err)
	}
	pc := poolConfig{pool: pool, namespace: "idemq", table: "idemq_worker_lease", size: 64, lease: 5 * time.Second}
	if addr.Kind == kindRedis {
		// A pool made by a deployment step: its first lease need not wait
		// out the fence of a pool that lost its records.
		rdb := redis.NewClient(addr.Redis)
		defer rdb.Close()
		l, err := redisidgen.New(rdb, redisidgen.Config{Pool: pool, Size: pc.size, Lease: pc.lease})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Create(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// The pool's size and lease come from flags; Redis's from the pool.
	args := []string{"id", "new", "--lease-store", storeURL, "--pool", pool, "--layout", "js-safe", "--count", "100", "--json"}
	if addr.IsSQL() {
		args = append(args, "--pool-size", "64", "--lease", "5s")
	}
	var first newOutput
	mustJSON(t, idemq(t, nil, args...), &first)
	if len(first.IDs) != 100 || first.Node < 0 || first.Node > 63 {
		t.Fatalf("leased IDs: %+v", first)
	}
	last, err := idgen.Parse(first.IDs[99])
	if err != nil {
		t.Fatal(err)
	}
	// A second run leases a node again and starts after the first.
	var second newOutput
	mustJSON(t, idemq(t, nil, args...), &second)
	if id, _ := idgen.Parse(second.IDs[0]); id <= last && second.Node == first.Node {
		t.Errorf("second run on node %d starts at %d, not after %d", second.Node, id, last)
	}

	// A holder of node 7, listed with its owner.
	leaser, closeLeaser, err := openLeaser(ctx, addr, pc, idgen.JSSafe, false)
	if err != nil {
		t.Fatal(err)
	}
	defer closeLeaser()
	lease, err := leaser.Acquire(ctx, idgen.LeaseRequest{MaxNode: 63, Static: true, Node: 7, Owner: "test-holder"})
	if err != nil {
		t.Fatal(err)
	}
	defer leaser.Release(ctx, lease, time.Time{})

	var leases []workerLease
	mustJSON(t, idemq(t, nil, "workers", "list", "--store", storeURL, "--pool", pool, "--json"), &leases)
	var held *workerLease
	for i, l := range leases {
		if l.Node == 7 {
			held = &leases[i]
		} else if l.Held {
			t.Errorf("node %d held: %+v", l.Node, l)
		}
	}
	if held == nil || !held.Held || held.Owner != "test-holder" {
		t.Fatalf("node 7 not listed as held by test-holder: %+v", leases)
	}
	if end, err := time.Parse(timeFormat, held.LeaseEnd); err != nil || !end.After(time.Now()) {
		t.Errorf("lease end %q (%v), want in the future", held.LeaseEnd, err)
	}
	if addr.IsSQL() {
		// SQL lists released nodes too, with the mark of their last ID.
		var used *workerLease
		for i, l := range leases {
			if l.Node == first.Node {
				used = &leases[i]
			}
		}
		mark, err := time.Parse(timeFormat, used.HighWater)
		if used == nil || err != nil || mark.Before(idgen.JSSafe.Decode(last).Time) {
			t.Errorf("released node %d: %+v, want its high-water mark at or after %v", first.Node, used, idgen.JSSafe.Decode(last).Time)
		}
	}
	r := idemq(t, nil, "workers", "list", "--store", storeURL, "--pool", pool)
	if r.code != 0 || !strings.Contains(r.stdout, "test-holder") || !strings.HasPrefix(r.stdout, "NODE") {
		t.Errorf("table:\n%v", r)
	}

	// Node 7 is taken: registering it fails once --timeout has passed.
	r = idemq(t, nil, "id", "new", "--lease-store", storeURL, "--pool", pool, "--layout", "js-safe", "--node", "7", "--timeout", "1s")
	wantFail(t, r, exitFailure, "lease a node of pool", pool, "no node came free within --timeout 1s")
}

// TestWorkersCreate lists a Redis pool that does not exist, which the
// command says once, why that may be and how to create it; creates it,
// which then lists no leases and grants its first at once; and refuses to
// create it again.
func TestWorkersCreate(t *testing.T) {
	storeURL, pool := redisBackend.url(t), unique("pool")
	r := idemq(t, nil, "workers", "list", "--store", storeURL, "--pool", pool)
	wantFail(t, r, exitFailure, `redisidgen: list pool "`+pool+`": Redis has no record of the pool`, "never created", "'idemq workers create --pool "+pool+"'")
	var created struct {
		Pool    string `json:"pool"`
		Size    int64  `json:"size"`
		LeaseMS int64  `json:"lease_ms"`
	}
	mustJSON(t, idemq(t, nil, "workers", "create", "--store", storeURL, "--pool", pool, "--layout", "js-safe", "--lease", "5s", "--json"), &created)
	if created.Pool != pool || created.Size != idgen.JSSafe.MaxNode()+1 || created.LeaseMS != 5000 {
		t.Errorf("created %+v, want pool %s of %d node ids, lease 5000 ms", created, pool, idgen.JSSafe.MaxNode()+1)
	}
	var leases []workerLease
	mustJSON(t, idemq(t, nil, "workers", "list", "--store", storeURL, "--pool", pool, "--json"), &leases)
	if len(leases) != 0 {
		t.Errorf("a new pool lists %+v", leases)
	}

	// A created pool grants at once: a pool without a record would
	// refuse a leaser that does not wait for one lease.
	addr, err := parseStore(storeURL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	leaser, closeLeaser, err := openLeaser(ctx, addr, poolConfig{pool: pool, namespace: "idemq"}, idgen.JSSafe, false)
	if err != nil {
		t.Fatal(err)
	}
	defer closeLeaser()
	lease, err := leaser.Acquire(ctx, idgen.LeaseRequest{MaxNode: idgen.JSSafe.MaxNode(), Owner: "test"})
	if err != nil {
		t.Fatalf("first lease of a created pool: %v", err)
	}
	if err := leaser.Release(ctx, lease, time.Time{}); err != nil {
		t.Fatal(err)
	}

	r = idemq(t, nil, "workers", "create", "--store", storeURL, "--pool", pool)
	wantFail(t, r, exitFailure, "redisidgen: pool exists", pool)
}

// TestLeaseFullPool asks id new and serve for a node of an SQLite pool
// whose only node a test holds: each waits out --timeout and exits 1 saying
// that no node came free.
func TestLeaseFullPool(t *testing.T) {
	ctx := context.Background()
	storeURL, pool := "sqlite://"+filepath.Join(t.TempDir(), "pool.db"), unique("pool")
	addr, err := parseStore(storeURL)
	if err != nil {
		t.Fatal(err)
	}
	leaser, closeLeaser, err := openLeaser(ctx, addr, poolConfig{pool: pool, table: workerLeaseTable, size: 1}, idgen.JSSafe, true)
	if err != nil {
		t.Fatal(err)
	}
	defer closeLeaser()
	holder, err := idgen.NewLeased(ctx, leaser, idgen.Config{Layout: idgen.JSSafe}, idgen.LeaseConfig{Owner: "test-holder"})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()

	lease := []string{"--lease-store", storeURL, "--pool", pool, "--pool-size", "1", "--layout", "js-safe", "--timeout", "1s"}
	for _, args := range [][]string{
		append([]string{"id", "new"}, lease...),
		append([]string{"serve", "--listen", "127.0.0.1:0"}, lease...),
	} {
		t.Run(args[0], func(t *testing.T) {
			wantFail(t, inProcess(t, "", args...), exitFailure, "lease a node of pool", pool, "no node came free within --timeout 1s")
		})
	}
}
