package sqlidgen_test

import (
	"context"
	"database/sql"
	"os"
	"testing"

	"github.com/idemq/idemq/idgen/sqlidgen"
	"github.com/idemq/idemq/internal/fleettest"
	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/sqldialect"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testenv"
)

func TestMain(m *testing.M) {
	racechild.Main(fleettest.Roles(newChildLeaser, newChildSegments))
	os.Exit(testenv.Run(m))
}

// newLeaser returns a Leaser over db, with its table migrated.
func newLeaser(tb testing.TB, db *sql.DB, d sqldialect.Dialect, cfg sqlidgen.Config) *sqlidgen.Leaser {
	tb.Helper()
	l, err := sqlidgen.New(db, d, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := l.Migrate(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return l
}

// eachBackend runs test once for each of backends, in parallel, with a
// database of its own.
func eachBackend(t *testing.T, backends []testdb.Backend, test func(t *testing.T, b testdb.Backend, db *sql.DB)) {
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			test(t, b, b.Open(t))
		})
	}
}
