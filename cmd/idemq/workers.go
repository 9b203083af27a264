package main

import (
	"context"
	"fmt"
	"io"

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
	addr, err := resolveStore(*storeURL, "store")
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
