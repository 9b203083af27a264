package sqldedupe_test

import (
	"database/sql/driver"
	"sync/atomic"
	"testing"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testkit"
)

// TestLostReply loses the answer of a claim's statement after the database
// ran it, as a dropped connection does: database/sql sends it again on
// another connection, with the same token, and the claim must take that
// token's record as its own rather than answer in flight to its own caller.
func TestLostReply(t *testing.T) {
	tests := []struct {
		name string
		// fresh keys, claimed after held keys were claimed by another owner
		fresh, held []string
	}{
		{"Claim", []string{"a"}, nil},
		{"ClaimMany", []string{"a", "b", "c"}, nil},
		{"ClaimManyWithHeld", []string{"a", "c"}, []string{"b"}},
	}
	for _, b := range testdb.Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			var lose atomic.Bool
			db := b.OpenWith(t, &testdb.Hooks{Statement: func(string) func() error {
				if !lose.CompareAndSwap(true, false) {
					return nil
				}
				return func() error { return driver.ErrBadConn }
			}})
			s := newStore(t, db, b.Dialect, sqldedupe.Config{})
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					ref := func(k string) dedupe.Ref { return dedupe.Ref{Group: t.Name(), Key: k} }
					var reqs []dedupe.Item
					for _, k := range tc.held {
						acquire(t, s, ref(k), long)
						reqs = append(reqs, dedupe.Item{Ref: ref(k)})
					}
					for _, k := range tc.fresh {
						reqs = append(reqs, dedupe.Item{Ref: ref(k)})
					}
					lose.Store(true)
					res, errs, err := s.Claim(t.Context(), reqs, long)
					if err != nil {
						t.Fatal(err)
					}
					if lose.Load() {
						t.Fatal("no statement ran")
					}
					for i, r := range res {
						want := dedupe.Acquired
						if i < len(tc.held) {
							want = dedupe.Busy
						}
						if errs[i] != nil || r.Outcome != want {
							t.Fatalf("claim %q whose answer was lost once = %v, %v; want %v", reqs[i].Ref, r.Outcome, errs[i], want)
						}
						if want != dedupe.Acquired {
							continue
						}
						if err := testkit.Complete(t.Context(), s, dedupe.Ticket{Ref: reqs[i].Ref, Token: r.Token}, long); err != nil {
							t.Fatalf("Complete(%q) with the token the claim answered: %v", reqs[i].Ref, err)
						}
					}
				})
			}
		})
	}
}
