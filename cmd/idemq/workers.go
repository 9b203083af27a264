package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/redisidgen"
	"github.com/idemq/idemq/idgen/sqlidgen"
	"github.com/idemq/idemq/internal/rediskey"
)

func workersCmd(ctx context.Context, e *env, args []string) error {
	return dispatch(ctx, e, "idemq workers", "Inspect worker-id pools (idgen/redisidgen, idgen/sqlidgen); create a Redis pool.", []subcommand{
		{"list", "list the leases of a pool: node, owner, lease end, high-water mark", workersList},
		{"create", "create a Redis pool, ready to lease at once", workersCreate},
	}, args)
}

// workerLease is one node of a pool, as workers list prints it.
type workerLease struct {
	Node  int64  `json:"node"`
	Owner string `json:"owner"`
	// Held is whether the lease is live by the store's clock. Redis lists
	// live leases only.
	Held bool `json:"held"`
	// LeaseEnd is when the lease ends, or ended.
	LeaseEnd string `json:"lease_end"`
	// HighWater is the node's high-water mark: every ID issued with the
	// node lies before it.
	HighWater string `json:"high_water"`
}

const workersListDoc = `List the leases of a worker-id pool: each node's owner, whether its lease is
held, when the lease ends (or ended) and its high-water mark, by the store's
clock. Redis keeps live leases only; SQL lists every node ever leased.`

func workersList(ctx context.Context, e *env, args []string) error {
	f := newFlags("idemq workers list", "--store URL --pool P [flags]", workersListDoc)
	storeURL := storeFlag(f.FlagSet)
	pool := f.String("pool", "", "worker-id `pool` name (required)")
	namespace := f.String("namespace", "idemq", "Redis key namespace of the pool")
	table := f.String("table", workerLeaseTable, "SQL table of the pool")
	rest, err := f.parse(e, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return f.usageErr("unexpected arguments %q", rest)
	}
	if *pool == "" {
		return f.usageErr("--pool is required: the name of the worker-id pool")
	}
	addr, err := resolveStore(*storeURL)
	if err != nil {
		return err
	}
	ctx, cancel := f.context(ctx)
	defer cancel()
	leaser, closeLeaser, err := openLeaser(ctx, addr, poolConfig{pool: *pool, namespace: *namespace, table: *table}, idgen.Sonyflake, false)
	if err != nil {
		return err
	}
	defer closeLeaser()
	var out []workerLease
	switch l := leaser.(type) {
	case *redisidgen.Leaser:
		infos, err := l.List(ctx)
		if errors.Is(err, idgen.ErrNoFreeNode) {
			return fmt.Errorf("workers list at %s: %w. The pool was never created and no generator has leased a node from it yet, or Redis lost its data. The first generator to lease from it creates it, after waiting one lease; 'idemq workers create --pool %s' creates it now", addr, err, *pool)
		}
		if err != nil {
			return fmt.Errorf("workers list at %s: %w", addr, err)
		}
		for _, in := range infos {
			out = append(out, workerLease{in.Node, in.Owner, true, fmtTime(in.Expires), fmtTime(in.HighWater)})
		}
	case *sqlidgen.Leaser:
		rows, err := l.List(ctx)
		if err != nil {
			return missingTable(fmt.Errorf("workers list at %s: %w", addr, err), workersTables, *table)
		}
		for _, r := range rows {
			out = append(out, workerLease{r.Node, r.Owner, r.Held, fmtTime(r.Expires), fmtTime(r.HighWater)})
		}
	}
	if out == nil {
		out = []workerLease{}
	}
	return f.emit(e, out, func(w io.Writer) {
		fmt.Fprintln(w, "NODE\tOWNER\tHELD\tLEASE END\tHIGH WATER")
		for _, l := range out {
			fmt.Fprintf(w, "%d\t%s\t%t\t%s\t%s\n", l.Node, l.Owner, l.Held, l.LeaseEnd, l.HighWater)
		}
	})
}

const workersCreateDoc = `Create a worker-id pool in Redis, ready to lease at once. Without it, the
first lease of a pool Redis has no record of waits one lease (see
idgen/redisidgen): the wait that protects the holders of a pool whose records
Redis lost. Run it once, from a deployment step, before any generator uses the
pool: creating a pool whose records were lost while holders still issue IDs
would hand their nodes out twice, which is why a pool that exists is refused.

Every leaser of a pool must use its size and lease: a generator's layout must
hold the pool's node ids. An SQL pool needs no creating, only its table (see
'idemq migrate --workers').`

func workersCreate(ctx context.Context, e *env, args []string) error {
	f := newFlags("idemq workers create", "--store URL --pool P [--layout L | --pool-size N] [--lease D] [flags]", workersCreateDoc)
	storeURL := storeFlag(f.FlagSet)
	pool := f.String("pool", "", "worker-id `pool` name (required)")
	layoutName := layoutFlag(f)
	poolSize := f.Int64("pool-size", 0, "node ids in the pool (default the --layout's node count)")
	lease := f.Duration("lease", 0, "lease length (default 10s)")
	namespace := f.String("namespace", "idemq", "Redis key namespace of the pool")
	rest, err := f.parse(e, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return f.usageErr("unexpected arguments %q", rest)
	}
	if *pool == "" {
		return f.usageErr("--pool is required: the name of the worker-id pool")
	}
	l, err := layoutByName(f, *layoutName)
	if err != nil {
		return err
	}
	if *poolSize == 0 {
		*poolSize = l.MaxNode() + 1
	}
	addr, err := resolveStore(*storeURL)
	if err != nil {
		return err
	}
	if addr.IsSQL() {
		return f.usageErr("%s is an SQL store, whose pools need no creating: create the table of every pool with 'idemq migrate --workers'", addr)
	}
	rdb := redis.NewClient(addr.Redis)
	defer rdb.Close()
	// New does no I/O: settings that cannot work fail before the store
	// is reached.
	leaser, err := redisidgen.New(rdb, redisidgen.Config{Pool: *pool, Size: *poolSize, Lease: *lease, Namespace: *namespace})
	if err != nil {
		return f.usageErr("%v", err)
	}
	ctx, cancel := f.context(ctx)
	defer cancel()
	if err := addr.pingRedis(ctx, rdb); err != nil {
		return err
	}
	if err := leaser.Create(ctx); err != nil {
		return fmt.Errorf("workers create at %s: %w", addr, err)
	}
	// What the pool recorded, which every leaser of it must be given.
	size, leaseLen, err := redisPoolMeta(ctx, rdb, poolConfig{pool: *pool, namespace: *namespace})
	if err != nil {
		return fmt.Errorf("workers create at %s: %w", addr, err)
	}
	out := struct {
		Pool string `json:"pool"`
		Size int64  `json:"size"`
		// LeaseMS is the lease in milliseconds, as the pool keeps it.
		LeaseMS int64 `json:"lease_ms"`
	}{*pool, size, leaseLen.Milliseconds()}
	return f.emit(e, out, func(w io.Writer) {
		fmt.Fprintln(w, "POOL\tNODE IDS\tLEASE")
		fmt.Fprintf(w, "%s\t0-%d\t%v\n", out.Pool, out.Size-1, leaseLen)
	})
}

// poolConfig names a worker-id pool in a store. Zero size and lease mean
// the pool's own (Redis) or the defaults.
type poolConfig struct {
	pool, namespace, table string
	size                   int64
	lease                  time.Duration
}

// openLeaser opens the worker-id pool pc in the store at addr; forLayout's
// node count sizes a new pool. create lets it create an SQL table or SQLite
// file. The returned func closes the connection.
func openLeaser(ctx context.Context, addr *storeAddr, pc poolConfig, forLayout idgen.Layout, create bool) (idgen.Leaser, func(), error) {
	if addr.Kind == kindRedis {
		rdb, err := addr.openRedis(ctx)
		if err != nil {
			return nil, nil, err
		}
		closeFn := func() { rdb.Close() }
		size, lease, err := redisPoolMeta(ctx, rdb, pc)
		if err != nil {
			closeFn()
			return nil, nil, err
		}
		if pc.size == 0 {
			pc.size = size
		}
		if pc.lease == 0 {
			pc.lease = lease
		}
		if pc.size == 0 {
			pc.size = forLayout.MaxNode() + 1
		}
		l, err := redisidgen.New(rdb, redisidgen.Config{Pool: pc.pool, Size: pc.size, Lease: pc.lease, Namespace: pc.namespace})
		if err != nil {
			closeFn()
			return nil, nil, usageError{err: err}
		}
		return l, closeFn, nil
	}
	db, err := addr.openSQL(ctx, create)
	if err != nil {
		return nil, nil, err
	}
	closeFn := func() { db.Close() }
	if pc.size == 0 {
		pc.size = min(forLayout.MaxNode()+1, sqlMaxPool)
	}
	l, err := sqlidgen.New(db, addr.Dialect, sqlidgen.Config{Pool: pc.pool, Size: pc.size, Lease: pc.lease, Table: pc.table})
	if err != nil {
		closeFn()
		return nil, nil, usageError{err: err}
	}
	if create {
		if err := l.Migrate(ctx); err != nil {
			closeFn()
			return nil, nil, fmt.Errorf("create the pool's table at %s: %w", addr, err)
		}
	}
	return l, closeFn, nil
}

// leaseGenerator returns a generator whose node is leased, as lc says, from
// the pool pc in the store at rawURL (--lease-store), waiting for a free
// node as long as ctx allows: up to timeout (--timeout), which the error
// names. It sets lc's Wait and Owner (host:pid). The returned func closes
// the store's connection; call it after the generator's Close, which
// releases the node.
func leaseGenerator(ctx context.Context, l idgen.Layout, rawURL string, pc poolConfig, lc idgen.LeaseConfig, timeout time.Duration) (*idgen.Generator, func(), error) {
	addr, err := resolveStoreFlag(rawURL, "lease-store")
	if err != nil {
		return nil, nil, err
	}
	leaser, closeLeaser, err := openLeaser(ctx, addr, pc, l, true)
	if err != nil {
		return nil, nil, err
	}
	lc.Wait, lc.Owner = true, "idemq"
	if host, err := os.Hostname(); err == nil {
		lc.Owner = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	gen, err := idgen.NewLeased(ctx, leaser, idgen.Config{Layout: l}, lc)
	if err != nil {
		closeLeaser()
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w; no node came free within --timeout %v", err, timeout)
		}
		return nil, nil, fmt.Errorf("lease a node of pool %q at %s: %w", pc.pool, addr, err)
	}
	return gen, closeLeaser, nil
}

// redisPoolMeta reads the size and lease a Redis pool was created with,
// which every leaser of the pool must be given; zero if the pool has no
// record yet.
func redisPoolMeta(ctx context.Context, rdb *redis.Client, pc poolConfig) (size int64, lease time.Duration, err error) {
	// New checks the names; the meta key is the one redisidgen documents.
	if _, err := redisidgen.New(rdb, redisidgen.Config{Pool: pc.pool, Size: 1, Namespace: pc.namespace}); err != nil {
		return 0, 0, usageError{err: err}
	}
	ns := pc.namespace
	if ns == "" {
		ns = "idemq"
	}
	vals, err := rdb.HMGet(ctx, rediskey.HashTag(ns, pc.pool)+":meta", "size", "lease").Result()
	if err != nil {
		return 0, 0, fmt.Errorf("read pool %q: %w", pc.pool, err)
	}
	if s, ok := vals[0].(string); ok {
		size, _ = strconv.ParseInt(s, 10, 64)
	}
	if s, ok := vals[1].(string); ok {
		ms, _ := strconv.ParseInt(s, 10, 64)
		lease = time.Duration(ms) * time.Millisecond
	}
	return size, lease, nil
}
