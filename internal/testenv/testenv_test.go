package testenv_test

import (
	"database/sql"
	"os"
	"testing"

	"github.com/idemq/idemq/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Run(m)) }

func TestSQLServersGiveFreshDatabases(t *testing.T) {
	for _, tc := range []struct {
		name, driver, query string
		dsn                 func(testing.TB) string
	}{
		{"mysql", "mysql", "SELECT VERSION()", testenv.MySQL},
		{"postgres", "pgx", "SELECT version()", testenv.Postgres},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := tc.dsn(t), tc.dsn(t)
			if a == b {
				t.Fatalf("two calls gave the same database %q", a)
			}
			db, err := sql.Open(tc.driver, a)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var v string
			if err := db.QueryRow(tc.query).Scan(&v); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %s", tc.name, v)
		})
	}
}

// recorder notes how Missing ended a test instead of ending it.
type recorder struct {
	testing.TB
	failed, skipped bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Fatalf(string, ...any) { r.failed = true }
func (r *recorder) Skipf(string, ...any)  { r.skipped = true }
func (r *recorder) Logf(string, ...any)   {}

func TestMissingFailsUnderCI(t *testing.T) {
	for _, tc := range []struct {
		ci                 string
		wantFail, wantSkip bool
	}{
		{ci: "true", wantFail: true},
		{ci: "", wantSkip: true},
		{ci: "false", wantSkip: true},
	} {
		t.Run("CI="+tc.ci, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			r := &recorder{TB: t}
			testenv.Missing(r, "redis: not installed")
			if r.failed != tc.wantFail || r.skipped != tc.wantSkip {
				t.Fatalf("failed=%v skipped=%v, want failed=%v skipped=%v", r.failed, r.skipped, tc.wantFail, tc.wantSkip)
			}
		})
	}
}
