package testkit

import (
	"database/sql"
	"testing"

	"github.com/idemq/idemq/outbox"
)

// AddCommitted adds msgs to o in one transaction on db, commits it, and
// returns the messages' keys, failing t on any error.
func AddCommitted(t testing.TB, db *sql.DB, o *outbox.Outbox, msgs ...outbox.Message) []string {
	t.Helper()
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	keys, err := o.AddBatch(t.Context(), tx, msgs)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return keys
}
