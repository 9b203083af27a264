package main

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/outbox"
)

// TestOutbox creates an outbox table with migrate, writes rows into it as a
// service would, and parks, lists, retries and counts them through the
// built binary, on each SQL store.
func TestOutbox(t *testing.T) {
	for _, b := range backends[1:] { // the SQL stores
		t.Run(b.name, func(t *testing.T) {
			storeURL := b.url(t)
			cli := func(args ...string) result {
				t.Helper()
				return idemq(t, nil, append(args[:2:2], append([]string{"--store", storeURL}, args[2:]...)...)...)
			}
			if r := idemq(t, nil, "migrate", "--store", storeURL, "--outbox"); r.code != 0 {
				t.Fatalf("migrate: %v", r)
			}
			addOutboxRows(t, storeURL, 3)

			var st struct {
				Pending, Sent, Parked int64
				OldestPendingSeconds  float64 `json:"oldest_pending_seconds"`
			}
			mustJSON(t, cli("outbox", "stats", "--json"), &st)
			if st.Pending != 3 || st.Parked != 0 || st.OldestPendingSeconds < 0 {
				t.Fatalf("stats: %+v", st)
			}
			var changed map[string]int64
			mustJSON(t, cli("outbox", "park", "--all", "--reason", "audit", "--json"), &changed)
			if changed["parked"] != 3 {
				t.Fatalf("park --all: %v", changed)
			}
			var list struct{ Rows []outboxRow }
			mustJSON(t, cli("outbox", "list", "--json"), &list)
			if len(list.Rows) != 3 || list.Rows[0].Key != "order-0" || list.Rows[0].LastError != "audit" || list.Rows[0].State != "parked" || list.Rows[0].Topic != "orders" {
				t.Fatalf("list: %+v", list)
			}
			first := fmt.Sprint(list.Rows[0].ID)
			mustJSON(t, cli("outbox", "retry", first, "--json"), &changed)
			if changed["retried"] != 1 {
				t.Fatalf("retry %s: %v", first, changed)
			}
			mustJSON(t, cli("outbox", "list", "--state", "pending", "--json"), &list)
			if len(list.Rows) != 1 || list.Rows[0].Key != "order-0" {
				t.Fatalf("pending after retry: %+v", list)
			}
			r := cli("outbox", "stats")
			if r.code != 0 || !regexp.MustCompile(`(?m)^1 +0 +2 `).MatchString(r.stdout) {
				t.Errorf("stats table:\n%v", r)
			}
			r = cli("outbox", "list")
			if r.code != 0 || !strings.Contains(r.stdout, "order-2") || !strings.Contains(r.stdout, "audit") {
				t.Errorf("list table:\n%v", r)
			}
			wantFail(t, cli("outbox", "stats", "--table", "nope"), exitFailure, `table "nope" does not exist`, "idemq migrate --outbox --outbox-table nope")
		})
	}
}

// openOutbox opens the outbox at storeURL, without a key source, until t
// ends.
func openOutbox(t *testing.T, storeURL string) (*outbox.Outbox, *sql.DB) {
	t.Helper()
	addr, err := resolveStore(storeURL)
	if err != nil {
		t.Fatal(err)
	}
	db, err := addr.openSQL(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	o, err := outbox.New(db, addr.Dialect, nil, outbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return o, db
}

// addOutboxRows adds n rows keyed order-0, order-1... to the outbox at
// storeURL, in one transaction.
func addOutboxRows(t *testing.T, storeURL string, n int) {
	t.Helper()
	o, db := openOutbox(t, storeURL)
	var msgs []outbox.Message
	for i := range n {
		msgs = append(msgs, outbox.Message{Topic: "orders", Body: []byte("x"), Properties: map[string]string{msgkey.Property: fmt.Sprintf("order-%d", i)}})
	}
	testkit.AddCommitted(t, db, o, msgs...)
}
