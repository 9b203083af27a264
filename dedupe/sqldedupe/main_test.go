package sqldedupe_test

import (
	"context"
	"database/sql"
	"os"
	"testing"

	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Run(m)) }

// newStore returns a migrated Store over db, closed when tb ends. The
// tables are made first, by a store without background cleanup, as an
// application migrates before it serves: a cleanup due every few
// milliseconds, as in these tests, races the DDL otherwise (SQLite answered
// the migration with SQLITE_BUSY at once).
func newStore(tb testing.TB, db *sql.DB, d dialect.Dialect, cfg sqldedupe.Config) *sqldedupe.Store {
	tb.Helper()
	migrateHere := cfg.CleanupInterval <= 0
	if !migrateHere {
		newStore(tb, db, d, sqldedupe.Config{Table: cfg.Table, CleanupInterval: -1})
	}
	s, err := sqldedupe.New(db, d, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	if !migrateHere {
		return s
	}
	if err := s.Migrate(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return s
}
