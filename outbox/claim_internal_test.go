package outbox

import (
	"context"
	"database/sql"
	"slices"
	"testing"
	"time"

	"github.com/idemq/idemq/internal/testdb"
)

func TestRunsOf(t *testing.T) {
	claim := []row{{id: 1}, {id: 2}, {id: 3}, {id: 5}, {id: 8}, {id: 9}}
	tests := []struct {
		name string
		ids  []int64
		want []span
	}{
		{"All", []int64{9, 1, 2, 3, 5, 8}, []span{{1, 9}}},
		{"None", nil, nil},
		{"Gaps", []int64{1, 2, 5, 9}, []span{{1, 2}, {5, 5}, {9, 9}}},
		{"OneInTheMiddle", []int64{3}, []span{{3, 3}}},
		{"AroundAHole", []int64{1, 3}, []span{{1, 1}, {3, 3}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := runsOf(claim, tc.ids); !slices.Equal(got, tc.want) {
				t.Errorf("runsOf(%v) = %v, want %v", tc.ids, got, tc.want)
			}
		})
	}
}

func TestKeepChosen(t *testing.T) {
	rows := []row{{id: 1}, {id: 2}, {id: 3}, {id: 4}}
	kept, extra := keepChosen(rows, []int64{1, 3, 4})
	var ids []int64
	for _, r := range kept {
		ids = append(ids, r.id)
	}
	if !slices.Equal(ids, []int64{1, 3, 4}) || !slices.Equal(extra, []span{{2, 2}}) {
		t.Errorf("keepChosen = %v, %v; want [1 3 4], [{2 2}]", ids, extra)
	}
}

// TestRowCommittedInsideASpan commits a row whose id lies between two rows
// a claim chose after the choice read past it, before the lease: the lease
// covers its id, and the row must go back, not ship with the claim (its
// ordering key's earlier rows were not looked at), and come with the next.
func TestRowCommittedInsideASpan(t *testing.T) {
	for _, b := range []testdb.Backend{testdb.MySQL, testdb.Postgres} {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db := b.Open(t)
			q := newQueries(b.Dialect, "idemq_outbox")
			for _, stmt := range q.schema {
				if _, err := db.ExecContext(ctx, stmt); err != nil {
					t.Fatal(err)
				}
			}
			insert := func(db interface {
				ExecContext(context.Context, string, ...any) (sql.Result, error)
			}, key string) {
				t.Helper()
				if _, err := db.ExecContext(ctx, q.insert(1), "orders", "", key, key, "", `{}`, []byte(key), 0); err != nil {
					t.Fatal(err)
				}
			}
			insert(db, "a")
			late, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer late.Rollback()
			insert(late, "b") // its id comes between a's and c's
			insert(db, "c")

			ids, runs, err := q.choose(ctx, db, 10)
			if err != nil || len(ids) != 2 || len(runs) != 1 || runs[0] != (span{ids[0], ids[1]}) {
				t.Fatalf("choose = %v, %v, %v: want a and c in one span", ids, runs, err)
			}
			if err := late.Commit(); err != nil {
				t.Fatal(err)
			}
			if err := q.lease(ctx, db, "first", time.Minute, ids, runs); err != nil {
				t.Fatal(err)
			}
			rows, err := q.leased(ctx, db, "first", ids, runs)
			if err != nil {
				t.Fatal(err)
			}
			next, err := q.claimRows(ctx, db, "second", time.Minute, 10)
			if err != nil {
				t.Fatal(err)
			}
			// On MySQL the lease stops at its count of rows (queries.bounded),
			// which b may take from c: c then waits for the next claim.
			got := func(rows []row) (s string) {
				for _, r := range rows {
					s += string(r.msg.Body)
				}
				return s
			}
			if first, second := got(rows), got(next); (first != "ac" || second != "b") && (first != "a" || second != "bc") {
				t.Fatalf("the lease took %q and the next claim %q: want b in the next claim only, a in the lease", first, second)
			}
		})
	}
}
