package main

import (
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// TestUsage runs command lines that cannot run, through the built binary:
// each exits 2 (1 for a serve that cannot reach its store or address) with
// a message saying what is wrong, before any store is reached, and prints
// nothing on stdout.
func TestUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  []string
		msgs []string
		code int
	}{
		{"no command", nil, nil, []string{"Usage:"}, exitUsage},
		{"unknown command", []string{"frobnicate"}, nil, []string{`unknown command "frobnicate"`}, exitUsage},
		{"unknown subcommand", []string{"id", "renew"}, nil, []string{`unknown subcommand "renew"`, "new, decode, layouts", "idemq id --help"}, exitUsage},
		{"missing subcommand", []string{"dedupe"}, nil, []string{"missing subcommand", "get, list, stats, forget"}, exitUsage},
		{"unknown flag", []string{"id", "new", "--node", "1", "--nodes", "2"}, nil, []string{"flag provided but not defined: --nodes", "idemq id new --help"}, exitUsage},
		{"flag without value", []string{"dedupe", "stats", "--group"}, nil, []string{"flag needs an argument: --group"}, exitUsage},
		{"bad flag value", []string{"id", "new", "--node", "1", "--count", "many"}, nil, []string{`invalid value "many" for flag --count`}, exitUsage},
		{"bad boolean", []string{"version", "--json=maybe"}, nil, []string{`invalid boolean value "maybe" for --json`}, exitUsage},
		{"version arguments", []string{"version", "now"}, nil, []string{"unexpected arguments"}, exitUsage},
		{"migrate nothing", []string{"migrate", "--store", "sqlite:x.db"}, nil, []string{"name the tables to create", "--dedupe, --workers, --segments, --outbox, or --all"}, exitUsage},
		{"migrate Redis", []string{"migrate", "--all", "--store", "redis://127.0.0.1:1/0"}, nil, []string{"Redis store, which needs no tables", "idemq workers create"}, exitUsage},
		{"migrate bad table", []string{"migrate", "--dedupe", "--dedupe-table", "a-b", "--store", "sqlite:x.db"}, nil, []string{`--dedupe-table "a-b"`}, exitUsage},
		{"migrate without store", []string{"migrate", "--all"}, nil, []string{"--store", storeEnv}, exitUsage},
		{"migrate arguments", []string{"migrate", "--all", "dedupe"}, nil, []string{"unexpected arguments"}, exitUsage},
		{"workers create without pool", []string{"workers", "create", "--store", "redis://127.0.0.1:1/0"}, nil, []string{"--pool is required"}, exitUsage},
		{"workers create on SQL", []string{"workers", "create", "--pool", "p", "--store", "sqlite:x.db"}, nil, []string{"need no creating", "idemq migrate --workers"}, exitUsage},
		{"workers create bad lease", []string{"workers", "create", "--pool", "p", "--lease", "1ms", "--store", "redis://127.0.0.1:1/0"}, nil, []string{"Lease 1ms"}, exitUsage},
		{"missing store", []string{"dedupe", "stats", "--group", "g"}, nil, []string{"--store", storeEnv}, exitUsage},
		{"missing store env empty", []string{"workers", "list", "--pool", "p"}, []string{storeEnv + "="}, []string{"--store", storeEnv}, exitUsage},
		{"bad store URL", []string{"dedupe", "stats", "--group", "g", "--store", "mongodb://u:pw@h/db"}, nil, []string{`unknown scheme "mongodb"`, "u:xxxxx@h"}, exitUsage},
		{"bad store URL from env", []string{"workers", "list", "--pool", "p"}, []string{storeEnv + "=redis://h:6379/notanumber"}, []string{"invalid database number"}, exitUsage},
		{"missing group", []string{"dedupe", "get", "--store", "redis://127.0.0.1:1/0", "k"}, nil, []string{"--group is required"}, exitUsage},
		{"missing pool", []string{"workers", "list", "--store", "redis://127.0.0.1:1/0"}, nil, []string{"--pool is required"}, exitUsage},
		{"invalid key", []string{"dedupe", "get", "--store", "redis://127.0.0.1:1/0", "--group", "g", "bad\x01key"}, nil, []string{"invalid"}, exitUsage},
		{"too long key", []string{"dedupe", "forget", "--store", "redis://127.0.0.1:1/0", "--group", "g", strings.Repeat("k", 1000)}, nil, []string{"invalid"}, exitUsage},
		{"no keys", []string{"dedupe", "get", "--store", "redis://127.0.0.1:1/0", "--group", "g"}, nil, []string{"no keys"}, exitUsage},
		{"bad limit", []string{"dedupe", "list", "--store", "redis://127.0.0.1:1/0", "--group", "g", "--limit", "0"}, nil, []string{"--limit 0"}, exitUsage},
		{"id no node", []string{"id", "new"}, nil, []string{"--node is required", "unique among all generators", "--lease-store"}, exitUsage},
		{"id node out of range", []string{"id", "new", "--node", "1024"}, nil, []string{"--node 1024", "0 to 1023"}, exitUsage},
		{"id worker out of range", []string{"id", "new", "--node", "1:32"}, nil, []string{"worker 32 outside 0..31"}, exitUsage},
		{"id node not a number", []string{"id", "new", "--node", "x"}, nil, []string{`--node "x"`}, exitUsage},
		{"id split node without datacenter bits", []string{"id", "new", "--layout", "sonyflake", "--node", "1:2"}, nil, []string{"no datacenter bits"}, exitUsage},
		{"id unknown layout", []string{"id", "new", "--node", "1", "--layout", "snowflake"}, nil, []string{`unknown layout "snowflake"`, "twitter"}, exitUsage},
		{"id exhausted layout", []string{"id", "new", "--node", "1", "--layout", "uid-generator"}, nil, []string{"exhausted"}, exitUsage},
		{"id count", []string{"id", "new", "--node", "1", "--count", "0"}, nil, []string{"--count 0"}, exitUsage},
		{"id format", []string{"id", "new", "--node", "1", "--format", "hex"}, nil, []string{`--format "hex"`}, exitUsage},
		{"id pool without store", []string{"id", "new", "--pool", "p"}, nil, []string{"--pool needs --lease-store"}, exitUsage},
		{"id lease store without pool", []string{"id", "new", "--lease-store", "redis://127.0.0.1:1/0"}, nil, []string{"--lease-store needs --pool"}, exitUsage},
		{"id bad lease store", []string{"id", "new", "--lease-store", "redis//x", "--pool", "p"}, nil, []string{"--lease-store", "without a scheme"}, exitUsage},
		{"id arguments", []string{"id", "new", "--node", "1", "5"}, nil, []string{"unexpected arguments"}, exitUsage},
		{"id bad ID", []string{"id", "decode", "12x"}, nil, []string{`"12x" is no ID`}, exitUsage},
		{"id decimal out of range", []string{"id", "decode", "9223372036854775808"}, nil, []string{"exceeds 9223372036854775807"}, exitUsage},
		{"id ID beyond layout", []string{"id", "decode", "--layout", "js-safe", "9007199254740992"}, nil, []string{"does not fit layout js-safe", "53 bits"}, exitUsage},
		{"id bad base32", []string{"id", "decode", "--format", "base32", "UUUUUUUUUUUUU"}, nil, []string{"base-32"}, exitUsage},
		{"id bad format", []string{"id", "decode", "--format", "hex", "1"}, nil, []string{`--format "hex"`}, exitUsage},
		{"id no IDs", []string{"id", "decode"}, nil, []string{"no IDs"}, exitUsage},
		{"id layouts arguments", []string{"id", "layouts", "twitter"}, nil, []string{"unexpected arguments"}, exitUsage},
		{"outbox retry without ids", []string{"outbox", "retry", "--store", "mysql://u@127.0.0.1:1/db"}, nil, []string{"want row ids, or --all"}, exitUsage},
		{"outbox park ids and all", []string{"outbox", "park", "--all", "3", "--store", "mysql://u@127.0.0.1:1/db"}, nil, []string{"not both"}, exitUsage},
		{"outbox retry bad id", []string{"outbox", "retry", "x", "--store", "mysql://u@127.0.0.1:1/db"}, nil, []string{`row id "x"`}, exitUsage},
		{"outbox list bad state", []string{"outbox", "list", "--state", "done", "--store", "mysql://u@127.0.0.1:1/db"}, nil, []string{`--state "done"`}, exitUsage},
		{"outbox list bad limit", []string{"outbox", "list", "--limit", "0", "--store", "mysql://u@127.0.0.1:1/db"}, nil, []string{"--limit 0"}, exitUsage},
		{"outbox stats arguments", []string{"outbox", "stats", "x", "--store", "mysql://u@127.0.0.1:1/db"}, nil, []string{"unexpected arguments"}, exitUsage},
		{"outbox unknown subcommand", []string{"outbox", "drop", "--store", "mysql://u@127.0.0.1:1/db"}, nil, []string{`unknown subcommand "drop"`}, exitUsage},
		{"outbox on Redis", []string{"outbox", "stats", "--store", "redis://127.0.0.1:1/0"}, nil, []string{"an outbox is a table in the service's SQL database"}, exitUsage},
		{"segment create without step", []string{"segment", "create", "t", "--store", "redis://127.0.0.1:1/0"}, nil, []string{"--step is required"}, exitUsage},
		{"segment create without tag", []string{"segment", "create", "--step", "5", "--store", "redis://127.0.0.1:1/0"}, nil, []string{"want one tag"}, exitUsage},
		{"segment create max below start", []string{"segment", "create", "t", "--step", "5", "--start", "10", "--max", "9", "--store", "redis://127.0.0.1:1/0"}, nil, []string{"--max 9 is below --start 10"}, exitUsage},
		{"segment create negative start", []string{"segment", "create", "t", "--step", "5", "--start", "-1", "--store", "redis://127.0.0.1:1/0"}, nil, []string{"--start -1"}, exitUsage},
		{"segment set-max not a number", []string{"segment", "set-max", "t", "lots", "--store", "redis://127.0.0.1:1/0"}, nil, []string{`maximum "lots"`}, exitUsage},
		{"segment set-max negative", []string{"segment", "set-max", "t", "-5", "--store", "redis://127.0.0.1:1/0"}, nil, []string{"-5"}, exitUsage},
		{"segment set-max without max", []string{"segment", "set-max", "t", "--store", "redis://127.0.0.1:1/0"}, nil, []string{"want a tag and a maximum"}, exitUsage},
		{"segment show two tags", []string{"segment", "show", "a", "b", "--store", "redis://127.0.0.1:1/0"}, nil, []string{"at most one tag"}, exitUsage},
		{"segment unknown subcommand", []string{"segment", "delete", "t", "--store", "redis://127.0.0.1:1/0"}, nil, []string{`unknown subcommand "delete"`}, exitUsage},
		{"relay no broker", []string{"relay", "--store", "sqlite:///nonexistent/dir/x.db"}, nil, []string{"give --namesrv ADDR"}, exitUsage},
		{"relay both brokers", []string{"relay", "--store", "sqlite:///nonexistent/dir/x.db", "--namesrv", "a:1", "--proxy", "b:2"}, nil, []string{"give --namesrv ADDR"}, exitUsage},
		{"relay proxy without topic", []string{"relay", "--store", "sqlite:///nonexistent/dir/x.db", "--proxy", "b:2"}, nil, []string{"--proxy: name a topic"}, exitUsage},
		{"relay topic without proxy", []string{"relay", "--store", "sqlite:///nonexistent/dir/x.db", "--namesrv", "a:1", "--topic", "orders"}, nil, []string{"--topic is for --proxy"}, exitUsage},
		{"relay bad batch", []string{"relay", "--store", "sqlite:///nonexistent/dir/x.db", "--namesrv", "a:1", "--batch", "0"}, nil, []string{"batch 0"}, exitUsage},
		{"relay bad level", []string{"relay", "--store", "sqlite:///nonexistent/dir/x.db", "--namesrv", "a:1", "--log-level", "loud"}, nil, []string{`--log-level "loud"`}, exitUsage},
		{"relay notify on SQLite", []string{"relay", "--store", "sqlite:///nonexistent/dir/x.db", "--namesrv", "a:1", "--notify"}, nil, []string{"--notify: sqlite:///nonexistent/dir/x.db is not PostgreSQL"}, exitUsage},
		{"serve without listen", []string{"serve", "--node", "1"}, nil, []string{"--listen is required"}, exitUsage},
		{"serve nothing to serve", []string{"serve", "--listen", ":0"}, nil, []string{"nothing to serve: give --node N"}, exitUsage},
		{"serve node and lease store", []string{"serve", "--listen", ":0", "--node", "1", "--lease-store", "redis://127.0.0.1:1", "--pool", "p"}, nil, []string{"not both"}, exitUsage},
		{"serve lease store without pool", []string{"serve", "--listen", ":0", "--lease-store", "redis://127.0.0.1:1"}, nil, []string{"--lease-store needs --pool"}, exitUsage},
		{"serve pool without lease store", []string{"serve", "--listen", ":0", "--node", "1", "--pool", "p"}, nil, []string{"--pool needs --lease-store"}, exitUsage},
		{"serve unknown layout", []string{"serve", "--listen", ":0", "--node", "1", "--layout", "nope"}, nil, []string{`unknown layout "nope"`}, exitUsage},
		{"serve node out of range", []string{"serve", "--listen", ":0", "--node", "99999"}, nil, []string{"node"}, exitUsage},
		{"serve bad level", []string{"serve", "--listen", ":0", "--node", "1", "--log-level", "loud"}, nil, []string{"--log-level"}, exitUsage},
		{"serve bad drain timeout", []string{"serve", "--listen", ":0", "--node", "1", "--drain-timeout", "0s"}, nil, []string{"--drain-timeout"}, exitUsage},
		{"serve arguments", []string{"serve", "--listen", ":0", "--node", "1", "extra"}, nil, []string{"unexpected arguments"}, exitUsage},
		{"serve bad store URL", []string{"serve", "--listen", ":0", "--store", "ftp://x"}, nil, []string{"unknown scheme"}, exitUsage},
		{"serve missing SQLite file", []string{"serve", "--listen", ":0", "--store", "sqlite:///nonexistent/dir/ids.db"}, nil, []string{"name an existing database file"}, exitFailure},
		{"serve unreachable store", []string{"serve", "--listen", ":0", "--store", "redis://127.0.0.1:1/0"}, nil, []string{"127.0.0.1:1"}, exitFailure},
		{"serve bad listen address", []string{"serve", "--listen", "256.0.0.1:0", "--node", "1"}, nil, []string{"listen on 256.0.0.1:0"}, exitFailure},
	}
	// None of them reaches a store, so this file is never made.
	for _, tt := range tests {
		for i, a := range tt.args {
			if a == "sqlite:x.db" {
				tt.args[i] = "sqlite://" + filepath.Join(t.TempDir(), "x.db")
			}
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := idemq(t, tt.env, tt.args...)
			wantFail(t, r, tt.code, tt.msgs...)
			if r.stdout != "" {
				t.Errorf("a usage error printed on stdout:\n%s", r.stdout)
			}
		})
	}
}

// TestHelp checks that --help at every level prints the usage on stdout and
// exits 0, naming every flag with the double dash docs/cli.md uses.
func TestHelp(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--help"}, "Commands:"},
		{[]string{"help"}, "Exit status"},
		{[]string{"id", "--help"}, "Subcommands:"},
		{[]string{"id", "new", "--help"}, "no default node"},
		{[]string{"id", "decode", "-h"}, "base-62"},
		{[]string{"id", "layouts", "--help"}, "end of life"},
		{[]string{"dedupe", "help"}, "forget"},
		{[]string{"dedupe", "get", "--help"}, "\n  --group group\n"},
		{[]string{"dedupe", "list", "--help"}, "\n  --cursor cursor\n"},
		{[]string{"dedupe", "stats", "--help"}, "\n  --store URL\n"},
		{[]string{"dedupe", "forget", "--help"}, "\n  --yes-reprocess\n"},
		{[]string{"workers", "--help"}, "create"},
		{[]string{"workers", "list", "--help"}, "high-water"},
		{[]string{"workers", "create", "--help"}, "\n  --pool-size int\n"},
		{[]string{"segment", "--help"}, "set-max"},
		{[]string{"segment", "show", "--help"}, "--store"},
		{[]string{"segment", "create", "--help"}, "\n  --step IDs\n"},
		{[]string{"segment", "set-max", "--help"}, "MAX"},
		{[]string{"serve", "--help"}, "\n  --drain-timeout duration\n"},
		{[]string{"migrate", "--help"}, "\n  --all\n"},
		{[]string{"version", "--help"}, "module the binary was built from"},
	}
	// A flag with one dash: at the start of a line or after a space or
	// bracket, a dash and a letter.
	singleDash := regexp.MustCompile(`(?m)(^|[\s(\[|'])-[A-Za-z]`)
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := inProcess(t, "", tt.args...)
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("want exit 0 and nothing on stderr, got %v", r)
			}
			if !strings.Contains(r.stdout, tt.want) {
				t.Errorf("help lacks %q:\n%s", tt.want, r.stdout)
			}
			if m := singleDash.FindString(r.stdout); m != "" {
				t.Errorf("help names a flag with one dash (%q):\n%s", m, r.stdout)
			}
		})
	}
}

// TestVersion checks that 'idemq version' and 'idemq --version' print the
// module version and the Go release that built the binary.
func TestVersion(t *testing.T) {
	want := "idemq (devel) " // a binary built in the checkout
	for _, args := range [][]string{{"version"}, {"--version"}} {
		t.Run(args[0], func(t *testing.T) {
			r := idemq(t, nil, args...)
			if r.code != 0 || r.stderr != "" || !strings.HasPrefix(r.stdout, want) ||
				!strings.HasSuffix(r.stdout, " "+runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH+"\n") {
				t.Errorf("want %q ... %s %s/%s, got %v", want, runtime.Version(), runtime.GOOS, runtime.GOARCH, r)
			}
		})
	}
	var v buildVersion
	mustJSON(t, idemq(t, nil, "version", "--json"), &v)
	if v.Version != "(devel)" || v.Go != runtime.Version() || v.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("version --json: %+v", v)
	}
}

// TestParseInterspersed checks that flags may follow arguments and that
// "--" ends the flags, so that a key may begin with a dash.
func TestParseInterspersed(t *testing.T) {
	tests := []struct {
		args      []string
		wantArgs  []string
		wantGroup string
	}{
		{[]string{"a", "--group", "g", "b"}, []string{"a", "b"}, "g"},
		{[]string{"--group=g", "a"}, []string{"a"}, "g"},
		{[]string{"a", "--", "--group", "-k"}, []string{"a", "--group", "-k"}, ""},
		{[]string{"--group", "g", "--", "-k"}, []string{"-k"}, "g"},
		{nil, nil, ""},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			f := newFlags("idemq test", "", "")
			group := f.String("group", "", "")
			got, err := f.parse(&env{}, tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, "|") != strings.Join(tt.wantArgs, "|") || *group != tt.wantGroup {
				t.Errorf("args %q group %q, want %q %q", got, *group, tt.wantArgs, tt.wantGroup)
			}
		})
	}
}
