package dedupetest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/dedupetest"
	"github.com/idemq/idemq/dedupe/memdedupe"
)

func TestFaultStore(t *testing.T) {
	ref := func(k string) dedupe.Ref { return dedupe.Ref{Group: "g", Key: k} }
	tests := []struct {
		name  string
		fault dedupetest.Fault
		// fails[i] says whether the ith Claim, of keys k0, k1, ..., fails.
		fails []bool
		// recorded says whether a failed claim reached the store.
		recorded bool
	}{
		{"Every", dedupetest.Fault{}, []bool{true, true, true}, false},
		{"EveryClaim", dedupetest.Fault{Ops: dedupetest.OpClaim}, []bool{true, true}, false},
		{"OtherOps", dedupetest.Fault{Ops: dedupetest.OpComplete | dedupetest.OpClaimBatch}, []bool{false, false}, false},
		{"Second", dedupetest.Fault{Ops: dedupetest.OpClaim, Nth: 2}, []bool{false, true, false, false}, false},
		{"SecondAfter", dedupetest.Fault{Nth: 2, After: true}, []bool{false, true, false}, true},
		{"EveryAfter", dedupetest.Fault{After: true}, []bool{true, true}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := memdedupe.New(memdedupe.Config{})
			fs := dedupetest.NewFaultStore(mem)
			fs.Inject(tt.fault)
			for i, fail := range tt.fails {
				r := ref(string(rune('a' + i)))
				res, err := fs.Claim(t.Context(), dedupe.ClaimRequest{Ref: r, Lease: time.Hour})
				if fail != (err != nil) {
					t.Fatalf("claim %d: %v, %v; want failure %v", i, res.Status, err, fail)
				}
				if !fail {
					if res.Status != dedupe.Acquired {
						t.Fatalf("claim %d = %v", i, res.Status)
					}
					continue
				}
				if !errors.Is(err, dedupetest.ErrInjected) {
					t.Errorf("claim %d: %v, want ErrInjected", i, err)
				}
				got, err := mem.Claim(t.Context(), dedupe.ClaimRequest{Ref: r, Lease: time.Hour})
				if err != nil {
					t.Fatal(err)
				}
				if reached := got.Status == dedupe.InFlight; reached != tt.recorded {
					t.Errorf("failed claim %d reached the store: %v, want %v", i, reached, tt.recorded)
				}
			}
			if got := fs.Calls(dedupetest.OpClaim); got != len(tt.fails) {
				t.Errorf("Calls(OpClaim) = %d, want %d", got, len(tt.fails))
			}
		})
	}
}

func TestFaultStoreHeal(t *testing.T) {
	fs := dedupetest.NewFaultStore(memdedupe.New(memdedupe.Config{}))
	fs.Inject(dedupetest.Fault{})
	req := dedupe.ClaimRequest{Ref: dedupe.Ref{Group: "g", Key: "k"}, Lease: time.Hour}
	if _, err := fs.Claim(t.Context(), req); !errors.Is(err, dedupetest.ErrInjected) {
		t.Fatalf("Claim = %v, want ErrInjected", err)
	}
	fs.Heal()
	res, err := fs.Claim(t.Context(), req)
	if err != nil || res.Status != dedupe.Acquired {
		t.Fatalf("Claim after Heal = %v, %v; want acquired", res.Status, err)
	}
}

// TestFaultStoreBatch checks that a batch counts as one call of its own op
// and that every method is counted under its op.
func TestFaultStoreBatch(t *testing.T) {
	ctx := context.Background()
	fs := dedupetest.NewFaultStore(memdedupe.New(memdedupe.Config{}))
	reqs := []dedupe.ClaimRequest{
		{Ref: dedupe.Ref{Group: "g", Key: "a"}, Lease: time.Hour},
		{Ref: dedupe.Ref{Group: "g", Key: "b"}, Lease: time.Hour},
	}
	fs.Inject(dedupetest.Fault{Ops: dedupetest.OpClaim})
	res, errs, err := dedupe.ClaimBatch(ctx, fs, reqs)
	if err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("ClaimBatch with Claim failing = %v, %v", errs, err)
	}
	ts := []dedupe.Ticket{{Ref: reqs[0].Ref, Token: res[0].Token}, {Ref: reqs[1].Ref, Token: res[1].Token}}
	fs.Inject(dedupetest.Fault{Ops: dedupetest.OpCompleteBatch, Nth: 1})
	if _, err := dedupe.CompleteBatch(ctx, fs, ts, time.Hour); !errors.Is(err, dedupetest.ErrInjected) {
		t.Fatalf("CompleteBatch = %v, want ErrInjected", err)
	}
	if _, err := dedupe.ReleaseBatch(ctx, fs, ts[:1]); err != nil {
		t.Fatal(err)
	}
	if err := fs.Extend(ctx, ts[1], time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := fs.Complete(ctx, ts[1], time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := fs.Release(ctx, ts[1]); !errors.Is(err, dedupe.ErrLeaseLost) {
		t.Fatalf("Release of a done key = %v, want ErrLeaseLost", err)
	}
	for op, want := range map[dedupetest.Op]int{
		dedupetest.OpClaim:                                0,
		dedupetest.OpClaimBatch:                           1,
		dedupetest.OpCompleteBatch | dedupetest.OpRelease: 2,
		dedupetest.OpReleaseBatch:                         1,
		dedupetest.OpExtend | dedupetest.OpComplete:       2,
		dedupetest.OpAll:                                  6,
	} {
		if got := fs.Calls(op); got != want {
			t.Errorf("Calls(%v) = %d, want %d", op, got, want)
		}
	}
}

func TestOpString(t *testing.T) {
	for op, want := range map[dedupetest.Op]string{
		0:                                        "none",
		dedupetest.OpClaim:                       "Claim",
		dedupetest.OpExtend | dedupetest.OpClaim: "Claim|Extend",
		dedupetest.OpReleaseBatch | 1<<10:        "ReleaseBatch|Op(0x400)",
	} {
		if got := op.String(); got != want {
			t.Errorf("Op(%#x).String() = %q, want %q", uint(op), got, want)
		}
	}
}
