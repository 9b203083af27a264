package main

import (
	"strings"
	"testing"

	"github.com/idemq/idemq/internal/sqldialect"
)

func TestParseStore(t *testing.T) {
	tests := []struct {
		name, url string
		kind      string
		// dsn or redis address wanted; for errors, text the error holds.
		want string
	}{
		{"redis", "redis://127.0.0.1:6379/2", kindRedis, "127.0.0.1:6379"},
		{"redis with password", "redis://u:secret@127.0.0.1:6379", kindRedis, "127.0.0.1:6379"},
		{"rediss", "rediss://cache.example:6380/0", kindRedis, "cache.example:6380"},
		{"mysql", "mysql://app:pw@db.example:3307/orders?parseTime=true", "mysql", "app:pw@tcp(db.example:3307)/orders?parseTime=true"},
		{"mysql default port", "mysql://app:pw@db.example/orders", "mysql", "app:pw@tcp(db.example:3306)/orders"},
		{"postgres", "postgres://u:p@127.0.0.1:5432/app?sslmode=disable", "postgres", "postgres://u:p@127.0.0.1:5432/app?sslmode=disable"},
		{"postgresql", "postgresql://u@h/app", "postgres", "postgresql://u@h/app"},
		{"postgres password parameter", "postgres://u@h/app?password=hunter2", "postgres", "password=hunter2"},
		{"sqlite absolute", "sqlite:///var/lib/idemq/s.db", "sqlite", "file:/var/lib/idemq/s.db?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate"},
		{"sqlite own params", "sqlite:///s.db?_pragma=busy_timeout(1)", "sqlite", "file:/s.db?_pragma=busy_timeout(1)"},
		{"sqlite relative", "sqlite:s.db", "sqlite", "/s.db?"},

		{"host and port only", "127.0.0.1:6379", "", "want redis://"},
		{"no scheme", "cache.example/0", "", "without a scheme"},
		{"unknown scheme", "mongodb://h/db", "", `unknown scheme "mongodb"`},
		{"bad redis db", "redis://h:6379/x", "", "invalid database number"},
		{"redis without host", "redis:///0", "", "name the server"},
		{"redis with only a port", "redis://:6379", "", "name the server"},
		{"mysql without db", "mysql://u:p@h:3306", "", "name one database"},
		{"mysql bad param", "mysql://u:p@h:3306/db?parseTime=maybe", "", "invalid bool value"},
		{"sqlite with host", "sqlite://host/s.db", "", "three slashes"},
		{"sqlite without file", "sqlite:", "", "name the database file"},
		{"password redacted", "mysql://u:hunter2@h:3306", "", "u:xxxxx@h:3306"},
		{"password in an opaque URL redacted", "redis:u:hunter2@h", "", "redis:xxxxx"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := parseStore(tt.url)
			if tt.kind == "" {
				if err == nil {
					t.Fatalf("parseStore(%q) = %+v, want an error", tt.url, a)
				}
				if !strings.Contains(err.Error(), tt.want) {
					t.Errorf("error %q lacks %q", err, tt.want)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Errorf("error %q shows the password", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseStore(%q): %v", tt.url, err)
			}
			if a.Kind != tt.kind {
				t.Errorf("kind %q, want %q", a.Kind, tt.kind)
			}
			got := a.DSN
			if a.Kind == kindRedis {
				got = a.Redis.Addr
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if strings.Contains(a.Redacted, "secret") || strings.Contains(a.Redacted, "hunter2") || strings.Contains(a.String(), ":pw@") {
				t.Errorf("Redacted %q shows the password", a.Redacted)
			}
		})
	}
}

func TestResolveStoreFromEnv(t *testing.T) {
	t.Setenv(storeEnv, "")
	if _, err := resolveStore(""); err == nil || !strings.Contains(err.Error(), "--store") || !strings.Contains(err.Error(), storeEnv) {
		t.Fatalf("no store: got %v, want an error naming --store and %s", err, storeEnv)
	}
	t.Setenv(storeEnv, "redis://127.0.0.1:1/0")
	a, err := resolveStore("")
	if err != nil || a.Redis.Addr != "127.0.0.1:1" {
		t.Fatalf("store from %s: got %+v, %v", storeEnv, a, err)
	}
	a, err = resolveStore("sqlite:///x.db")
	if err != nil || a.Dialect != sqldialect.SQLite {
		t.Fatalf("--store wins over %s: got %+v, %v", storeEnv, a, err)
	}
}

// FuzzParseStore: any text parses or fails without a panic, a parsed URL
// names a server (or a SQLite file), and neither the redacted form nor an
// error ever shows the password.
func FuzzParseStore(f *testing.F) {
	for _, s := range []string{
		"redis://u:hunter2@127.0.0.1:6379/2", "rediss://:hunter2@h:6380", "redis:///0",
		"mysql://u:hunter2@h:3306/db?parseTime=true", "postgres://u:hunter2@h/app", "sqlite:///tmp/x.db",
		"sqlite:x.db", "mongodb://h", "", "::", "redis://u:hunter2@[::1]:6379/x", "postgres://h/db?password=hunter2",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		a, err := parseStore(raw)
		const secret = "hunter2"
		if err != nil {
			if strings.Contains(raw, ":"+secret+"@") && strings.Contains(err.Error(), secret) {
				t.Fatalf("parseStore(%q) error shows the password: %v", raw, err)
			}
			return
		}
		switch a.Kind {
		case kindRedis:
			if a.Redis == nil || a.Redis.Addr == "" || strings.HasPrefix(a.Redis.Addr, ":") {
				t.Fatalf("parseStore(%q) = redis at %q: no server named", raw, a.Redis.Addr)
			}
		default:
			if !sqldialect.Valid(a.Dialect) || a.Kind != a.Dialect.String() || a.Driver == "" || a.DSN == "" {
				t.Fatalf("parseStore(%q) = %+v: no dialect, driver or DSN", raw, a)
			}
		}
		if (strings.Contains(raw, ":"+secret+"@") || strings.Contains(raw, "password="+secret)) && strings.Contains(a.Redacted, secret) {
			t.Fatalf("parseStore(%q).Redacted = %q shows the password", raw, a.Redacted)
		}
	})
}
