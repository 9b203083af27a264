package main

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return strconv.Itoa(port)
}

// TestUnreachable runs every command that reaches a store against stores
// that are not there: each exits 1 saying which store failed, where
// (password hidden) and what to check.
func TestUnreachable(t *testing.T) {
	port := closedPort(t)
	missing := filepath.Join(t.TempDir(), "missing.db")
	stores := []struct {
		name, url, redacted, msg string
	}{
		{"Redis", "redis://u:secret@127.0.0.1:" + port + "/0", "redis://u:xxxxx@127.0.0.1:" + port + "/0", "check that the server runs"},
		{"MySQL", "mysql://u:secret@127.0.0.1:" + port + "/app", "mysql://u:xxxxx@127.0.0.1:" + port + "/app", "check that the server runs"},
		{"Postgres", "postgres://u:secret@127.0.0.1:" + port + "/app?sslmode=disable", "postgres://u:xxxxx@127.0.0.1:" + port + "/app", "check that the server runs"},
		{"SQLite", "sqlite://" + missing, "sqlite://" + missing, "name an existing database file"},
	}
	commands := [][]string{
		{"dedupe", "get", "--group", "g", "k"},
		{"dedupe", "list", "--group", "g"},
		{"dedupe", "stats", "--group", "g"},
		{"dedupe", "forget", "--group", "g", "--yes-reprocess", "k"},
		{"workers", "list", "--pool", "p"},
		{"segment", "show"},
		{"segment", "set-max", "t", "5"},
	}
	for _, s := range stores {
		for _, c := range commands {
			t.Run(s.name+"/"+strings.Join(c[:2], "-"), func(t *testing.T) {
				r := idemq(t, nil, append(c, "--store", s.url)...)
				wantFail(t, r, exitFailure, "store at "+s.redacted, s.msg)
				if strings.Contains(r.stderr, "secret") {
					t.Errorf("stderr shows the password:\n%s", r.stderr)
				}
			})
		}
	}
	// Commands that create their table reach the server first too.
	for _, s := range stores[:3] {
		t.Run(s.name+"/create", func(t *testing.T) {
			wantFail(t, idemq(t, nil, "segment", "create", "t", "--step", "5", "--store", s.url), exitFailure, "store at "+s.redacted, s.msg)
			wantFail(t, idemq(t, nil, "id", "new", "--lease-store", s.url, "--pool", "p"), exitFailure, "store at "+s.redacted, s.msg)
		})
	}
}

// TestMissingTable reads an SQL database that has none of the tables: each
// command exits 1 saying that the table does not exist and how to create
// it.
func TestMissingTable(t *testing.T) {
	sqlite := backend{"SQLite", func(t testing.TB) string {
		path := filepath.Join(t.TempDir(), "empty.db")
		if err := os.WriteFile(path, nil, 0o600); err != nil { // an empty file is an empty database
			t.Fatal(err)
		}
		return "sqlite://" + path
	}}
	for _, b := range []backend{sqlite, mysqlBackend, postgresBackend} {
		t.Run(b.name, func(t *testing.T) {
			store := b.url(t)
			for _, c := range []struct {
				args           []string
				table, migrate string
			}{
				{[]string{"dedupe", "stats", "--group", "g"}, "idemq_dedupe", "'idemq migrate --dedupe'"},
				{[]string{"dedupe", "list", "--group", "g", "--table", "dedupe2"}, "dedupe2", "'idemq migrate --dedupe --dedupe-table dedupe2'"},
				{[]string{"workers", "list", "--pool", "p"}, "idemq_worker_lease", "'idemq migrate --workers'"},
				{[]string{"segment", "show"}, "idemq_segment", "'idemq migrate --segments'"},
				{[]string{"segment", "show", "--table", "leaf_alloc"}, "leaf_alloc", "'idemq migrate --segments --segment-table leaf_alloc'"},
				{[]string{"segment", "set-max", "t", "5"}, "idemq_segment", "'idemq migrate --segments'"},
			} {
				r := idemq(t, nil, append(c.args, "--store", store)...)
				wantFail(t, r, exitFailure, `table "`+c.table+`" does not exist in this database`, "create it with "+c.migrate, "Migrate in Go")
			}
		})
	}
}
