package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"

	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/idgen/sqlidgen"
	"github.com/idemq/idemq/internal/dedupekit"
	"github.com/idemq/idemq/internal/sqldialect"
	"github.com/idemq/idemq/outbox"
	"github.com/idemq/idemq/outbox/pgwake"
)

const migrateDoc = `Create the SQL tables that consumers, ID generators and the other commands
use, unless they exist: the dedupe records (--dedupe, package
dedupe/sqldedupe), the worker-id leases (--workers, idgen/sqlidgen's
Leaser; one table holds every pool) and the segment tags (--segments,
idgen/sqlidgen's Segments) and the transactional outbox (--outbox, package
outbox; on PostgreSQL, --notify adds the trigger by which 'idemq relay
--notify' is woken when rows are committed, package outbox/pgwake). Name at
least one, or --all. Each package's own
Migrate runs, so the tables are the ones a program calling it would make,
and running the command again changes nothing. A SQLite file is created if
missing.

Redis needs no tables: a Redis worker-id pool is made by its first lease, or
beforehand by 'idemq workers create'.`

// A tableKind is one kind of SQL table: migrate creates it, and a command
// that finds it missing says how to.
type tableKind struct {
	// flag selects it in migrate, tableFlag names it there, defaultTable is
	// its default name; holds says what it holds and goMigrate what creates
	// it in Go.
	flag, tableFlag, defaultTable, holds, goMigrate string
	run                                             func(ctx context.Context, db *sql.DB, d sqldialect.Dialect, table string) error
}

var (
	dedupeTables   = tableKind{"dedupe", "dedupe-table", dedupekit.DefaultTable, "dedupe records", "sqldedupe's Store.Migrate", migrateDedupe}
	workersTables  = tableKind{"workers", "pool-table", workerLeaseTable, "worker-id leases", "sqlidgen's Leaser.Migrate", migrateWorkers}
	segmentsTables = tableKind{"segments", "segment-table", segmentTable, "segment tags", "sqlidgen's Segments.Migrate", migrateSegments}
	outboxTables   = tableKind{"outbox", "outbox-table", outbox.DefaultTable, "outbox messages", "outbox's Outbox.Migrate", migrateOutbox}
)

// missingTable adds to err, when it says that an SQL table does not exist,
// how to create it: the tables are made by 'idemq migrate' or the
// package's Migrate, not by the commands that read them.
func missingTable(err error, k tableKind, table string) error {
	if !sqldialect.MissingTable(err) {
		return err
	}
	cmd := "idemq migrate --" + k.flag
	if table != k.defaultTable {
		cmd += " --" + k.tableFlag + " " + table
	}
	return fmt.Errorf("%w; table %q does not exist in this database: create it with '%s' on this store (or %s in Go), or name the table that holds the %s with --table and its database in the store URL", err, table, cmd, k.goMigrate, k.holds)
}

func migrateCmd(ctx context.Context, e *env, args []string) error {
	f := newFlags("idemq migrate", "--store URL (--dedupe | --workers | --segments | --outbox | --all) [flags]", migrateDoc)
	storeURL := storeFlag(f.FlagSet)
	all := f.Bool("all", false, "create every table below")
	kinds := []tableKind{dedupeTables, workersTables, segmentsTables, outboxTables}
	selected := make([]*bool, len(kinds))
	tables := make([]*string, len(kinds))
	for i, k := range kinds {
		selected[i] = f.Bool(k.flag, false, "create the table of the "+k.holds)
	}
	tables[0] = f.String(dedupeTables.tableFlag, dedupeTables.defaultTable, "SQL `table` of the dedupe records (--table of 'idemq dedupe')")
	tables[1] = f.String(workersTables.tableFlag, workersTables.defaultTable, "SQL `table` of the worker-id leases (--table of 'idemq workers list' and 'idemq id new', --pool-table of 'idemq serve')")
	tables[2] = f.String(segmentsTables.tableFlag, segmentsTables.defaultTable, "SQL `table` of the segment tags (--table of 'idemq segment' and 'idemq serve')")
	tables[3] = f.String(outboxTables.tableFlag, outboxTables.defaultTable, "SQL `table` of the outbox messages (--table of 'idemq outbox')")
	notify := f.Bool("notify", false, "with --outbox, PostgreSQL only: also install the trigger that wakes 'idemq relay --notify' when rows are committed (package outbox/pgwake)")
	rest, err := f.parse(e, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return f.usageErr("unexpected arguments %q", rest)
	}
	var todo []int
	for i := range kinds {
		if *all || *selected[i] {
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		return f.usageErr("name the tables to create: --dedupe, --workers, --segments, --outbox, or --all")
	}
	if *notify && !*all && !*selected[3] {
		return f.usageErr("--notify installs a trigger on the outbox table: give --outbox (or --all) with it")
	}
	for _, i := range todo {
		if !sqldialect.ValidTable(*tables[i]) {
			return f.usageErr("--%s %q: want %s", kinds[i].tableFlag, *tables[i], sqldialect.TableRule)
		}
	}
	addr, err := resolveStore(*storeURL)
	if err != nil {
		return err
	}
	if !addr.IsSQL() {
		return f.usageErr("%s is a Redis store, which needs no tables: a worker-id pool is made by its first lease, or by 'idemq workers create'", addr)
	}
	if *notify && addr.Dialect != sqldialect.Postgres {
		return f.usageErr("--notify: %s is not PostgreSQL: LISTEN/NOTIFY wakes relays on PostgreSQL only; other stores' relays poll", addr)
	}
	ctx, cancel := f.context(ctx)
	defer cancel()
	db, err := addr.openSQL(ctx, true)
	if err != nil {
		return err
	}
	defer db.Close()
	type created struct {
		Table string `json:"table"`
		Holds string `json:"holds"`
	}
	out := struct {
		Store  string    `json:"store"`
		Tables []created `json:"tables"`
	}{Store: addr.String()}
	for _, i := range todo {
		k, table := kinds[i], *tables[i]
		if err := k.run(ctx, db, addr.Dialect, table); err != nil {
			return fmt.Errorf("migrate: create the table of the %s at %s: %w", k.holds, addr, err)
		}
		out.Tables = append(out.Tables, created{table, k.holds})
		if k.flag == outboxTables.flag && *notify {
			if err := pgwake.Install(ctx, db, table); err != nil {
				return fmt.Errorf("migrate: install the wake-up trigger at %s: %w", addr, err)
			}
			out.Tables = append(out.Tables, created{table, "wake-up trigger for 'idemq relay --notify'"})
		}
	}
	return f.emit(e, out, func(w io.Writer) {
		fmt.Fprintln(w, "TABLE\tHOLDS")
		for _, c := range out.Tables {
			fmt.Fprintf(w, "%s\t%s\n", c.Table, c.Holds)
		}
	})
}

func migrateDedupe(ctx context.Context, db *sql.DB, d sqldialect.Dialect, table string) error {
	// The cleanup goroutine is the consumers' job.
	s, err := sqldedupe.New(db, d, sqldedupe.Config{Table: table, CleanupInterval: -1})
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Migrate(ctx)
}

func migrateWorkers(ctx context.Context, db *sql.DB, d sqldialect.Dialect, table string) error {
	// Every pool shares the table; the pool named here is never touched,
	// since Migrate reads and writes no row.
	l, err := sqlidgen.New(db, d, sqlidgen.Config{Pool: "migrate", Size: 1, Table: table})
	if err != nil {
		return err
	}
	return l.Migrate(ctx)
}

func migrateSegments(ctx context.Context, db *sql.DB, d sqldialect.Dialect, table string) error {
	s, err := sqlidgen.NewSegments(db, d, table)
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Migrate(ctx)
}

func migrateOutbox(ctx context.Context, db *sql.DB, d sqldialect.Dialect, table string) error {
	o, err := outbox.New(db, d, nil, outbox.Config{Table: table})
	if err != nil {
		return err
	}
	return o.Migrate(ctx)
}

// sqlidgen's tables when none is named, which the flags show and pass: a
// sender's sqlidgen.Lease leases from the first, so that 'idemq workers
// list' finds its pool without --table.
const (
	workerLeaseTable = "idemq_worker_lease"
	segmentTable     = "idemq_segment"
	// sqlMaxPool is the largest pool sqlidgen leases from, a row per
	// node id (Sonyflake's 16 node bits).
	sqlMaxPool = 1 << 16
)
