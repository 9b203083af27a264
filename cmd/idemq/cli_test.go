package main

import (
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
		{"unknown flag", []string{"id", "new", "--node", "1", "--nodes", "2"}, nil, []string{"flag provided but not defined: -nodes", "idemq id new --help"}},
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
// exits 0.
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
		{[]string{"dedupe", "get", "--help"}, "-group"},
		{[]string{"dedupe", "list", "--help"}, "-cursor"},
		{[]string{"dedupe", "stats", "--help"}, "-store URL"},
		{[]string{"dedupe", "forget", "--help"}, "-yes-reprocess"},
		{[]string{"workers", "--help"}, "list"},
		{[]string{"workers", "list", "--help"}, "high-water"},
		{[]string{"segment", "--help"}, "set-max"},
		{[]string{"segment", "show", "--help"}, "-store"},
		{[]string{"segment", "create", "--help"}, "-step"},
		{[]string{"segment", "set-max", "--help"}, "MAX"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := inProcess(t, "", tt.args...)
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("want exit 0 and nothing on stderr, got %v", r)
			}
			if !strings.Contains(r.stdout, tt.want) {
				t.Errorf("help lacks %q:\n%s", tt.want, r.stdout)
			}
		})
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
