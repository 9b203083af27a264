package sqldedupe

import (
	"context"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
)

func TestAnswer(t *testing.T) {
	const now = int64(1_700_000_000_000_000)
	row := upsertRow{ref: dedupe.Ref{Group: "g", Key: "k"}, fp: "A", token: "mine"}
	tests := []struct {
		name  string
		row   upsertRow
		rec   record
		want  dedupe.ClaimResult
		asked bool // false: ask again
	}{
		{"Acquired", row, record{state: stateProcessing, token: "mine", fp: "A", expires: now + 5e6, now: now},
			dedupe.ClaimResult{Status: dedupe.Acquired, Token: "mine"}, true},
		{"InFlight", row, record{state: stateProcessing, token: "theirs", fp: "A", expires: now + 5e6, now: now},
			dedupe.ClaimResult{Status: dedupe.InFlight, Until: time.UnixMicro(now + 5e6), Remaining: 5 * time.Second}, true},
		{"Done", row, record{state: stateDone, token: "theirs", expires: now + 1, now: now},
			dedupe.ClaimResult{Status: dedupe.Done, Until: time.UnixMicro(now + 1), Remaining: time.Microsecond}, true},
		{"Conflict", row, record{state: stateDone, token: "theirs", fp: "B", expires: now + 1, now: now},
			dedupe.ClaimResult{Status: dedupe.Conflict}, true},
		{"NoFingerprintAsked", upsertRow{ref: row.ref, token: "mine"}, record{state: stateDone, token: "theirs", fp: "B", expires: now + 1, now: now},
			dedupe.ClaimResult{Status: dedupe.Done, Until: time.UnixMicro(now + 1), Remaining: time.Microsecond}, true},
		// Between MySQL's two statements the kept record's lease ended.
		{"EndedSince", row, record{state: stateProcessing, token: "theirs", fp: "B", expires: now, now: now},
			dedupe.ClaimResult{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, asked := answer(tc.row, tc.rec)
			if got != tc.want || asked != tc.asked {
				t.Errorf("answer = %+v, %v; want %+v, %v", got, asked, tc.want, tc.asked)
			}
		})
	}
}

// scripted is a dialect whose upserts answer from a script, one entry per
// statement; a key the entry leaves out has no record in the answer.
type scripted struct {
	sqlDialect                     // the methods the tests do not call
	script     []map[string]string // key → token holding it; "" for the row's own
	asked      [][]string          // keys of each statement
}

func (f *scripted) upsert(_ context.Context, _ runner, _ string, rows []upsertRow) (map[dedupe.Ref]record, error) {
	step := f.script[min(len(f.asked), len(f.script)-1)]
	var keys []string
	recs := map[dedupe.Ref]record{}
	for _, row := range rows {
		keys = append(keys, row.ref.Key)
		if holder, ok := step[row.ref.Key]; ok {
			if holder == "" {
				holder = row.token
			}
			recs[row.ref] = record{state: stateProcessing, token: holder, expires: 2, now: 1}
		}
	}
	f.asked = append(f.asked, keys)
	return recs, nil
}

// TestUpsertAsksAgain checks that a key whose record changed between MySQL's
// statements is asked again, alone, and that a batch gives up when keys keep
// changing.
func TestUpsertAsksAgain(t *testing.T) {
	rows := func(keys ...string) []upsertRow {
		var out []upsertRow
		for _, k := range keys {
			out = append(out, upsertRow{ref: dedupe.Ref{Group: "g", Key: k}, dur: time.Second})
		}
		return out
	}
	f := &scripted{script: []map[string]string{
		{"a": "", "c": "theirs"}, // b vanished
		{"b": ""},
	}}
	s := &Store{d: f}
	res, err := s.upsert(t.Context(), runner{s: s}, stateProcessing, rows("c", "b", "a"))
	if err != nil {
		t.Fatal(err)
	}
	want := []dedupe.Status{dedupe.InFlight, dedupe.Acquired, dedupe.Acquired}
	for i, r := range res {
		if r.Status != want[i] {
			t.Errorf("item %d = %v, want %v", i, r.Status, want[i])
		}
	}
	if len(f.asked) != 2 || len(f.asked[0]) != 3 || f.asked[0][0] != "a" || len(f.asked[1]) != 1 || f.asked[1][0] != "b" {
		t.Errorf("statements asked %q, want [a b c] sorted, then [b]", f.asked)
	}

	f = &scripted{script: []map[string]string{{}}}
	s = &Store{d: f}
	if _, err := s.upsert(t.Context(), runner{s: s}, stateProcessing, rows("a")); err == nil {
		t.Error("upsert of a key that never holds a record succeeded")
	}
	if len(f.asked) != maxRetries+1 {
		t.Errorf("asked %d times, want %d", len(f.asked), maxRetries+1)
	}
}
