package sqldedupe_test

import (
	"context"
	"database/sql"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/internal/dedupekit"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testkit"
)

// TestRecordGoneBetweenStatements gives a MySQL claim a record to keep and
// deletes it before the claim's second statement reads the records, every
// time, as owners that release at once do under churn. The claim must still
// reach an answer: the key is free, so it is acquired.
func TestRecordGoneBetweenStatements(t *testing.T) {
	tests := []struct {
		name string
		keys []string // the record of "gone" vanishes
	}{
		{"Claim", []string{"gone"}},
		{"ClaimMany", []string{"a", "gone", "z"}},
	}
	var (
		db   *sql.DB
		gone atomic.Pointer[dedupe.Ref]
		met  atomic.Int64 // claim statements that met the vanishing record
	)
	exec := func(query string, r *dedupe.Ref) {
		args := []any{r.Namespace, r.Group, r.Key}
		if _, err := db.ExecContext(context.Background(), query, args...); err != nil {
			t.Errorf("%.40s: %v", query, err)
		}
	}
	db = testdb.MySQL.OpenWith(t, &testdb.Hooks{Statement: func(query string) func() error {
		r := gone.Load()
		if r == nil || !strings.HasPrefix(query, "INSERT INTO `"+dedupekit.DefaultTable+"`") {
			return nil
		}
		exec("REPLACE INTO `"+dedupekit.DefaultTable+"` (namespace, grp, k, state, token, fingerprint, expires_at, created_at, updated_at) "+
			"VALUES (?, ?, ?, 'processing', 'holder', '', UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))", r)
		return func() error {
			met.Add(1)
			exec("DELETE FROM `"+dedupekit.DefaultTable+"` WHERE namespace = ? AND grp = ? AND k = ? AND token = 'holder'", r)
			return nil
		}
	}})
	s := newStore(t, db, dialect.MySQL, sqldedupe.Config{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var reqs []dedupe.Item
			for _, k := range tc.keys {
				r := dedupe.Ref{Group: t.Name(), Key: k}
				if k == "gone" {
					gone.Store(&r)
				}
				reqs = append(reqs, dedupe.Item{Ref: r})
			}
			met.Store(0)
			res, errs, err := s.Claim(t.Context(), reqs, long)
			gone.Store(nil)
			if err != nil {
				t.Fatalf("claim whose kept record vanished %d times: %v", met.Load(), err)
			}
			for i, r := range res {
				if errs[i] != nil || r.Outcome != dedupe.Acquired {
					t.Fatalf("claim %q = %v, %v; want acquired", reqs[i].Ref, r.Outcome, errs[i])
				}
				if err := testkit.Complete(t.Context(), s, dedupe.Ticket{Ref: reqs[i].Ref, Token: r.Token}, long); err != nil {
					t.Fatalf("Complete(%q) with the token the claim answered: %v", reqs[i].Ref, err)
				}
			}
			if met.Load() == 0 {
				t.Error("no claim statement met the vanishing record")
			}
		})
	}
}
