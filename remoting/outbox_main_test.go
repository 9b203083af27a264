package remoting_test

import (
	"database/sql"
	"testing"

	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/outbox"
)

// migrated returns an outbox over db, its table made, whose keys come from
// a snowflake generator on node.
func migrated(tb testing.TB, db *sql.DB, d dialect.Dialect, node int64) *outbox.Outbox {
	tb.Helper()
	o, err := outbox.New(db, d, testkit.Keys(tb, node), outbox.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	if err := o.Migrate(tb.Context()); err != nil {
		tb.Fatal(err)
	}
	return o
}
