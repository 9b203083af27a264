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

// CountBy runs query, which selects a key and a count per row (SELECT k,
// COUNT(*) ... GROUP BY k), and returns the counts by key, failing t on
// any error.
func CountBy(t testing.TB, db *sql.DB, query string) map[string]int {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]int{}
	for rows.Next() {
		var (
			k string
			n int
		)
		if err := rows.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		got[k] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// OutboxKeys counts o's rows per message key, in every state, reading at
// most limit rows of each state.
func OutboxKeys(t testing.TB, o *outbox.Outbox, limit int) map[string]int {
	t.Helper()
	keys := map[string]int{}
	for _, state := range []outbox.State{outbox.Pending, outbox.Sent, outbox.Parked} {
		rows, err := o.List(t.Context(), state, 0, limit)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			keys[r.Key]++
		}
	}
	return keys
}
