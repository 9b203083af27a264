package sqldedupe_test

import (
	"context"
	"database/sql"
	"os"
	"testing"

	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Run(m)) }

// newStore returns a migrated Store over db, closed when tb ends.
func newStore(tb testing.TB, db *sql.DB, d sqldedupe.Dialect, cfg sqldedupe.Config) *sqldedupe.Store {
	tb.Helper()
	s, err := sqldedupe.New(db, d, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	if err := s.Migrate(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return s
}
