package sqldedupe

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
)

// TestAnswer checks the answer to a record MySQL's second statement read
// after the lease or retention that kept it ended: still the shortest wait.
func TestAnswer(t *testing.T) {
	const now = int64(1_700_000_000_000_000)
	row := upsertRow{ref: dedupe.Ref{Group: "g", Key: "k"}, fp: "A", token: "mine"}
	tests := []struct {
		name string
		row  upsertRow
		rec  record
		want dedupe.ClaimResult
	}{
		// Between MySQL's two statements the kept record's lease ended.
		// (The other answers are the conformance suite's, on every
		// dialect.)
		{"EndedSince", row, record{state: stateProcessing, token: "theirs", fp: "A", expires: now - 5, now: now},
			dedupe.ClaimResult{Outcome: dedupe.Busy, Until: time.UnixMicro(now - 5), Remaining: time.Microsecond}},
		{"EndedSinceConflict", row, record{state: stateDone, token: "theirs", fp: "B", expires: now, now: now},
			dedupe.ClaimResult{Outcome: dedupe.Reused}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := answer(tc.row, tc.rec); got != tc.want {
				t.Errorf("answer = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// scripted is a dialect whose upserts answer from a script, one entry per
// statement: an error, or the keys to answer, each with the token holding
// it ("" for the row's own).
type scripted struct {
	sqlDialect // the methods the tests do not call
	script     []step
	tokens     [][]string // the tokens of each statement's rows
}

type step struct {
	err     error
	holders map[string]string
}

func (f *scripted) upsert(_ context.Context, _ runner, rows []upsertRow) (map[dedupe.Ref]record, error) {
	st := f.script[min(len(f.tokens), len(f.script)-1)]
	var tokens []string
	for _, row := range rows {
		tokens = append(tokens, row.token)
	}
	f.tokens = append(f.tokens, tokens)
	if st.err != nil {
		return nil, st.err
	}
	recs := map[dedupe.Ref]record{}
	for _, row := range rows {
		if holder, ok := st.holders[row.ref.Key]; ok {
			if holder == "" {
				holder = row.token
			}
			recs[row.ref] = record{state: stateProcessing, token: holder, expires: 2, now: 1}
		}
	}
	return recs, nil
}

// deadlock is how go-sql-driver/mysql reports a deadlock.
var deadlock = errors.New("Error 1213 (40001): Deadlock found when trying to get lock; try restarting transaction")

// TestAloneInCallersTx checks that a statement the database rolled back
// inside a caller's transaction is not run again: the rollback took the
// caller's work too, so the error is the caller's. Outside one it runs
// again (TestUpsertRetries).
func TestAloneInCallersTx(t *testing.T) {
	r := runner{s: &Store{}, tx: new(sql.Tx)} // never used: do runs nothing
	calls := 0
	_, err := alone(t.Context(), r, func() (bool, error) {
		calls++
		return false, deadlock
	})
	if !errors.Is(err, deadlock) || calls != 1 {
		t.Errorf("alone in a caller's transaction = %v after %d calls, want the deadlock after 1", err, calls)
	}
}

// TestUpsertRetries checks that a claim the database rolled back runs again
// with the same tokens, and how upsert answers a dialect's failures.
func TestUpsertRetries(t *testing.T) {
	all := map[string]string{"a": "", "b": "theirs"}
	tests := []struct {
		name   string
		script []step
		want   []dedupe.Outcome // nil: an error
		stmts  int
	}{
		{"Answered", []step{{holders: all}}, []dedupe.Outcome{dedupe.Acquired, dedupe.Busy}, 1},
		{"Deadlocks", []step{{err: deadlock}, {err: deadlock}, {holders: all}}, []dedupe.Outcome{dedupe.Acquired, dedupe.Busy}, 3},
		{"OtherError", []step{{err: errors.New("broken")}, {holders: all}}, nil, 1},
		{"KeyUnanswered", []step{{holders: map[string]string{"a": ""}}}, nil, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &scripted{script: tc.script}
			s := &Store{d: f}
			rows := []upsertRow{
				{ref: dedupe.Ref{Group: "g", Key: "b"}, lease: time.Second},
				{ref: dedupe.Ref{Group: "g", Key: "a"}, lease: time.Second},
			}
			res, err := s.upsert(t.Context(), rows)
			if len(f.tokens) != tc.stmts {
				t.Errorf("ran %d statements, want %d", len(f.tokens), tc.stmts)
			}
			for _, tokens := range f.tokens[1:] {
				if tokens[0] != f.tokens[0][0] || tokens[1] != f.tokens[0][1] {
					t.Errorf("statements asked with tokens %q, want the same each time", f.tokens)
				}
			}
			if tc.want == nil {
				if err == nil {
					t.Fatalf("upsert = %v, want an error", res)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// Answers come in request order: b is theirs, a is ours.
			for i, w := range []dedupe.Outcome{tc.want[1], tc.want[0]} {
				if res[i].Outcome != w {
					t.Errorf("item %d = %v, want %v", i, res[i].Outcome, w)
				}
			}
		})
	}
}
