package main

import (
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// TestUsage runs command lines that cannot run, through the built binary:
// each exits 2 with a message saying what is wrong.
func TestUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  []string
		msgs []string
	}{
		{"no command", nil, nil, []string{"Usage:"}},
		{"unknown command", []string{"frobnicate"}, nil, []string{`unknown command "frobnicate"`}},
		{"unknown subcommand", []string{"id", "renew"}, nil, []string{`unknown subcommand "renew"`, "new, decode, layouts", "idemq id --help"}},
		{"missing subcommand", []string{"dedupe"}, nil, []string{"missing subcommand", "get, list, stats, forget"}},
		{"unknown flag", []string{"id", "new", "--node", "1", "--nodes", "2"}, nil, []string{"flag provided but not defined: --nodes", "idemq id new --help"}},
		{"flag without value", []string{"dedupe", "stats", "--group"}, nil, []string{"flag needs an argument: --group"}},
		{"bad flag value", []string{"id", "new", "--node", "1", "--count", "many"}, nil, []string{`invalid value "many" for flag --count`}},
		{"bad boolean", []string{"version", "--json=maybe"}, nil, []string{`invalid boolean value "maybe" for --json`}},
		{"version arguments", []string{"version", "now"}, nil, []string{"unexpected arguments"}},
		{"migrate nothing", []string{"migrate", "--store", "sqlite:x.db"}, nil, []string{"name the tables to create", "--dedupe, --workers, --segments, --outbox, or --all"}},
		{"migrate Redis", []string{"migrate", "--all", "--store", "redis://127.0.0.1:1/0"}, nil, []string{"Redis store, which needs no tables", "idemq workers create"}},
		{"migrate bad table", []string{"migrate", "--dedupe", "--dedupe-table", "a-b", "--store", "sqlite:x.db"}, nil, []string{`--dedupe-table "a-b"`}},
		{"migrate without store", []string{"migrate", "--all"}, nil, []string{"--store", storeEnv}},
		{"migrate arguments", []string{"migrate", "--all", "dedupe"}, nil, []string{"unexpected arguments"}},
		{"workers create without pool", []string{"workers", "create", "--store", "redis://127.0.0.1:1/0"}, nil, []string{"--pool is required"}},
		{"workers create on SQL", []string{"workers", "create", "--pool", "p", "--store", "sqlite:x.db"}, nil, []string{"need no creating", "idemq migrate --workers"}},
		{"workers create bad lease", []string{"workers", "create", "--pool", "p", "--lease", "1ms", "--store", "redis://127.0.0.1:1/0"}, nil, []string{"Lease 1ms"}},
		{"missing store", []string{"dedupe", "stats", "--group", "g"}, nil, []string{"--store", storeEnv}},
		{"missing store env empty", []string{"workers", "list", "--pool", "p"}, []string{storeEnv + "="}, []string{"--store", storeEnv}},
		{"bad store URL", []string{"dedupe", "stats", "--group", "g", "--store", "mongodb://u:pw@h/db"}, nil, []string{`unknown scheme "mongodb"`, "u:xxxxx@h"}},
		{"bad store URL from env", []string{"workers", "list", "--pool", "p"}, []string{storeEnv + "=redis://h:6379/notanumber"}, []string{"invalid database number"}},
		{"missing group", []string{"dedupe", "get", "--store", "redis://127.0.0.1:1/0", "k"}, nil, []string{"--group is required"}},
		{"missing pool", []string{"workers", "list", "--store", "redis://127.0.0.1:1/0"}, nil, []string{"--pool is required"}},
		{"invalid key", []string{"dedupe", "get", "--store", "redis://127.0.0.1:1/0", "--group", "g", "bad\x01key"}, nil, []string{"invalid"}},
		{"too long key", []string{"dedupe", "forget", "--store", "redis://127.0.0.1:1/0", "--group", "g", strings.Repeat("k", 1000)}, nil, []string{"invalid"}},
		{"no keys", []string{"dedupe", "get", "--store", "redis://127.0.0.1:1/0", "--group", "g"}, nil, []string{"no keys"}},
		{"bad limit", []string{"dedupe", "list", "--store", "redis://127.0.0.1:1/0", "--group", "g", "--limit", "0"}, nil, []string{"--limit 0"}},
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
			wantFail(t, r, exitUsage, tt.msgs...)
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
