package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

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
// store, then reads each with the commands that read it. (That the tables
// are the ones each package works on is its Migrate's test: migrate calls
// it.)
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

}
