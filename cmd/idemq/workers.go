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
)

func workersCmd(ctx context.Context, e *env, args []string) error {
	return dispatch(ctx, e, "idemq workers", "Inspect worker-id pools (idgen/redisidgen, idgen/sqlidgen).", []subcommand{
		{"list", "list the leases of a pool: node, owner, lease end, high-water mark", workersList},
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
	table := f.String("table", sqlidgen.DefaultTable, "SQL table of the pool")
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
		if err != nil {
			return fmt.Errorf("workers list at %s: %w", addr, err)
		}
		for _, in := range infos {
			out = append(out, workerLease{in.Node, in.Owner, true, fmtTime(in.Expires), fmtTime(in.HighWater)})
		}
	case *sqlidgen.Leaser:
		rows, err := l.List(ctx)
		if err != nil {
			return missingTable(fmt.Errorf("workers list at %s: %w", addr, err), *table)
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
		pc.size = min(forLayout.MaxNode()+1, sqlidgen.MaxSize)
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
	probe, err := redisidgen.New(rdb, redisidgen.Config{Pool: pc.pool, Size: 1, Namespace: pc.namespace})
	if err != nil {
		return 0, 0, usageError{err: err}
	}
	vals, err := rdb.HMGet(ctx, probe.Keys()[0], "size", "lease").Result()
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
