package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/idgen/sqlidgen"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/outbox/pgwake"
)

type migrateOutput struct {
	Store  string `json:"store"`
	Tables []struct {
		Table string `json:"table"`
		Holds string `json:"holds"`
	} `json:"tables"`
}

// TestMigrate creates the SQL tables through the built binary on each SQL
// store, then uses each through its package and the commands that read it.
func TestMigrate(t *testing.T) {
	for _, b := range []backend{sqliteBackend, mysqlBackend, postgresBackend} {
		t.Run(b.name, func(t *testing.T) {
			testMigrate(t, b)
		})
	}
}

// TestMigrateNotify installs pgwake's trigger with the outbox table on
// PostgreSQL: a row added then notifies the table's channel. Other stores,
// and --notify without the outbox, are usage errors.
func TestMigrateNotify(t *testing.T) {
	store := postgresBackend.url(t)
	var out migrateOutput
	mustJSON(t, idemq(t, nil, "migrate", "--store", store, "--json", "--outbox", "--notify"), &out)
	if len(out.Tables) != 2 || out.Tables[1].Table != "idemq_outbox" || !strings.Contains(out.Tables[1].Holds, "trigger") {
		t.Fatalf("migrate --outbox --notify: %+v", out.Tables)
	}
	addr, err := resolveStore(store)
	if err != nil {
		t.Fatal(err)
	}
	l, err := pgwake.Listen(context.Background(), addr.DSN, "idemq_outbox")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addOutboxRows(t, store, 1)
	select {
	case <-l.C:
	case <-time.After(time.Minute):
		t.Fatal("no notification a minute after a row was added")
	}

	wantFail(t, inProcess(t, "", "migrate", "--store", sqliteBackend.url(t), "--outbox", "--notify"), exitUsage, "is not PostgreSQL")
	wantFail(t, inProcess(t, "", "migrate", "--store", store, "--dedupe", "--notify"), exitUsage, "give --outbox")
}

func testMigrate(t *testing.T, b backend) {
	ctx := context.Background()
	store := b.url(t)
	tests := []struct {
		name   string
		args   []string
		tables []string
	}{
		{"one", []string{"--dedupe"}, []string{"idemq_dedupe"}},
		{"all", []string{"--all"}, []string{"idemq_dedupe", "idemq_worker_lease", "idemq_segment", "idemq_outbox"}},
		{"again", []string{"--all"}, []string{"idemq_dedupe", "idemq_worker_lease", "idemq_segment", "idemq_outbox"}},
		{"named", []string{"--workers", "--segments", "--pool-table", "leases2", "--segment-table", "leaf_alloc", "--dedupe-table", "unused"}, []string{"leases2", "leaf_alloc"}},
	}
	for _, tt := range tests {
		var out migrateOutput
		mustJSON(t, idemq(t, nil, append([]string{"migrate", "--store", store, "--json"}, tt.args...)...), &out)
		var got []string
		for _, c := range out.Tables {
			got = append(got, c.Table)
		}
		if !slices.Equal(got, tt.tables) {
			t.Errorf("%s: created %q, want %q", tt.name, got, tt.tables)
		}
	}

	// The commands that read the tables find them.
	for _, args := range [][]string{
		{"dedupe", "stats", "--group", "g"},
		{"workers", "list", "--pool", "p"},
		{"workers", "list", "--pool", "p", "--table", "leases2"},
		{"segment", "show"},
		{"segment", "show", "--table", "leaf_alloc"},
		{"outbox", "stats"},
	} {
		if r := idemq(t, nil, append(args, "--store", store)...); r.code != 0 {
			t.Errorf("%q after migrate: %v", args, r)
		}
	}
	wantFail(t, idemq(t, nil, "dedupe", "stats", "--group", "g", "--table", "unused", "--store", store), exitFailure, `table "unused" does not exist`)

	// They are the tables each package works on.
	addr, err := parseStore(store)
	if err != nil {
		t.Fatal(err)
	}
	db, err := addr.openSQL(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := sqldedupe.New(db, addr.Dialect, sqldedupe.Config{CleanupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ref := dedupe.Ref{Group: "g", Key: "order-1"}
	res, err := testkit.Claim(ctx, s, dedupe.Item{Ref: ref}, time.Minute)
	if err != nil || res.Outcome != dedupe.Acquired {
		t.Fatalf("claim after migrate: %+v, %v", res, err)
	}
	if err := testkit.Complete(ctx, s, dedupe.Ticket{Ref: ref, Token: res.Token}, time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{workerLeaseTable, "leases2"} {
		l, err := sqlidgen.New(db, addr.Dialect, sqlidgen.Config{Pool: "p", Size: 4, Table: table})
		if err != nil {
			t.Fatal(err)
		}
		lease, err := l.Acquire(ctx, idgen.LeaseRequest{MaxNode: 3})
		if err != nil {
			t.Fatalf("lease from %s after migrate: %v", table, err)
		}
		if err := l.Release(ctx, lease, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, table := range []string{segmentTable, "leaf_alloc"} {
		src, err := sqlidgen.NewSegments(db, addr.Dialect, table)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		if err := src.CreateTag(ctx, segment.Tag{Tag: "orders", MaxID: 1, Step: 10}); err != nil {
			t.Fatalf("tag in %s after migrate: %v", table, err)
		}
		if _, err := src.NextSegment(ctx, "orders", 0); err != nil {
			t.Fatal(err)
		}
	}
}
