package sqldedupe

import (
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/internal/testdb"
)

// TestClaimTxWithoutSetStatement claims in a transaction on a server that
// refuses SET STATEMENT, as MySQL does (MariaDB is made to by a misspelt
// one): the claim goes through without it, and so does every later one.
func TestClaimTxWithoutSetStatement(t *testing.T) {
	db := testdb.MySQL.Open(t)
	s, err := New(db, dialect.MySQL, Config{CleanupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	m := s.d.(*mysql)
	claim := func(key string) {
		t.Helper()
		tx, err := s.BeginTx(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if res, err := s.ClaimTx(t.Context(), tx, dedupe.Item{Ref: dedupe.Ref{Group: "g", Key: key}}, time.Hour); err != nil || res.Outcome != dedupe.Acquired {
			t.Fatalf("ClaimTx(%s) = %v, %v; want acquired", key, res.Outcome, err)
		}
	}
	claim("a")
	if m.noSetStatement.Load() {
		t.Fatal("MariaDB refused SET STATEMENT")
	}
	m.claimSQL[0] = "SET STATEMENTS innodb_lock_wait_timeout = 1 FOR " + m.claimSQL[1]
	claim("b")
	if !m.noSetStatement.Load() {
		t.Fatal("the refused SET STATEMENT is still tried")
	}
	claim("c")
}
