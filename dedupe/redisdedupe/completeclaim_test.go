package redisdedupe_test

import (
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
)

// TestCompleteClaim checks CompleteClaim on both paths: completions first,
// then claims, each answered as Complete and Claim answer, in one round
// trip on the native path.
func TestCompleteClaim(t *testing.T) {
	const hour = time.Hour
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			client := newClient(t)
			rt := new(countHook)
			client.AddHook(rt)
			trips := func() int {
				rt.mu.Lock()
				defer rt.mu.Unlock()
				return len(rt.cmds) + len(rt.pipelines)
			}
			s, err := redisdedupe.New(client, redisdedupe.Config{Prefix: "cc:" + rand.Text() + ":"})
			if err != nil {
				t.Fatal(err)
			}
			p.use(s)
			ctx := t.Context()
			ref := func(g, k string) dedupe.Ref { return dedupe.Ref{Namespace: "cc", Group: g, Key: k} }
			hold := func(r dedupe.Ref) dedupe.Ticket {
				res, err := testkit.Claim(ctx, s, dedupe.Item{Ref: r}, hour)
				if err != nil || res.Outcome != dedupe.Acquired {
					t.Fatalf("claim %s = %v, %v", r, res.Outcome, err)
				}
				return dedupe.Ticket{Ref: r, Token: res.Token}
			}
			// traced is t completed by the run of trace.
			traced := func(t dedupe.Ticket, trace string) dedupe.Ticket { t.Trace = trace; return t }
			const runA, runB = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
			// Loads the complete script, so that round trips are counted
			// without a NOSCRIPT's.
			if err := testkit.Complete(ctx, s, hold(ref("g", "warm")), hour); err != nil {
				t.Fatal(err)
			}
			tests := []struct {
				name     string
				ts       []dedupe.Ticket
				items    []dedupe.Item
				wantDone []error
				want     []dedupe.Outcome
			}{
				{name: "One", ts: []dedupe.Ticket{hold(ref("g", "a"))}, items: []dedupe.Item{{Ref: ref("g", "b")}},
					wantDone: []error{nil}, want: []dedupe.Outcome{dedupe.Acquired}},
				// The completion applies first: the claim finds the key done.
				// with the trace of the run that completed it.
				{name: "SameKey", ts: []dedupe.Ticket{traced(hold(ref("g", "c")), runA)}, items: []dedupe.Item{{Ref: ref("g", "c")}},
					wantDone: []error{nil}, want: []dedupe.Outcome{dedupe.Suppressed}},
				{name: "Batch", ts: []dedupe.Ticket{traced(hold(ref("g", "d")), runB), {Ref: ref("g", "e"), Token: "stale"}, hold(ref("h", "f")), {Ref: ref("g", "bad\x00")}},
					items:    []dedupe.Item{{Ref: ref("g", "d")}, {Ref: ref("h", "x")}, {Ref: ref("g", "bad\x00")}},
					wantDone: []error{nil, dedupe.ErrLeaseLost, nil, msgkey.ErrInvalid}, want: []dedupe.Outcome{dedupe.Suppressed, dedupe.Acquired, 0}},
				{name: "NoValidItem", ts: []dedupe.Ticket{hold(ref("g", "y"))}, items: []dedupe.Item{{Ref: ref("g", "bad\x00")}},
					wantDone: []error{nil}, want: []dedupe.Outcome{0}},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					before := trips()
					done, doneErr, res, errs, err := s.CompleteClaim(ctx, tt.ts, hour, tt.items, hour)
					if doneErr != nil || err != nil {
						t.Fatalf("CompleteClaim = %v, %v", doneErr, err)
					}
					for i, want := range tt.wantDone {
						if !errors.Is(done[i], want) || (want == nil && done[i] != nil) {
							t.Errorf("completion %d = %v, want %v", i, done[i], want)
						}
					}
					for i, want := range tt.want {
						if want == 0 {
							if !errors.Is(errs[i], msgkey.ErrInvalid) {
								t.Errorf("claim %d = %v, want invalid", i, errs[i])
							}
						} else if errs[i] != nil || res[i].Outcome != want {
							t.Errorf("claim %d = %v, %v; want %v", i, res[i].Outcome, errs[i], want)
						} else if want == dedupe.Suppressed && res[i].Trace != tt.ts[i].Trace {
							t.Errorf("claim %d answered trace %q, want the completion's %q", i, res[i].Trace, tt.ts[i].Trace)
						}
					}
					// A claim that finds a record reads it in a second.
					if n := trips() - before; p.name == "Native" && tt.name != "SameKey" && tt.name != "Batch" && n != 1 {
						t.Errorf("%d round trips, want 1", n)
					}
					for i, tk := range tt.ts {
						if tt.wantDone[i] == nil {
							r, _ := testkit.Claim(ctx, s, dedupe.Item{Ref: tk.Ref}, hour)
							if r.Outcome != dedupe.Suppressed || r.Trace != tk.Trace {
								t.Errorf("%s after its completion = %v with trace %q, want suppressed with %q", tk.Ref, r.Outcome, r.Trace, tk.Trace)
							}
						}
					}
				})
			}
		})
	}
}
