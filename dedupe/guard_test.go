package dedupe_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/dedupetest"
	"github.com/idemq/idemq/dedupe/memdedupe"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	ref        = dedupe.Ref{Namespace: "test", Group: "g", Key: "k"}
	errHandler = errors.New("handler failed")
)

func newGuard(t *testing.T, s dedupe.Store, cfg dedupe.GuardConfig) *dedupe.Guard {
	t.Helper()
	g, err := dedupe.NewGuard(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// status claims ref in s for a moment and returns the answer, releasing what
// it acquired.
func status(t *testing.T, s dedupe.Store, fp string) dedupe.Status {
	t.Helper()
	res, err := s.Claim(context.Background(), dedupe.ClaimRequest{Ref: ref, Lease: time.Hour, Fingerprint: fp})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status == dedupe.Acquired {
		if err := s.Release(context.Background(), dedupe.Ticket{Ref: ref, Token: res.Token}); err != nil {
			t.Fatal(err)
		}
	}
	return res.Status
}

func TestGuardDo(t *testing.T) {
	tests := []struct {
		name string
		cfg  dedupe.GuardConfig
		// setup prepares the store before Do.
		setup   func(t *testing.T, s dedupe.Store, fs *dedupetest.FaultStore)
		ref     dedupe.Ref
		fp      string
		handler error
		// want: Do's answer, whether the handler ran, the key's state after.
		wantOutcome dedupe.Outcome
		wantErr     []error
		wantRan     bool
		wantAfter   dedupe.Status
	}{{
		name:        "Success",
		wantOutcome: dedupe.Ran, wantRan: true, wantAfter: dedupe.Done,
	}, {
		name:        "HandlerError",
		handler:     errHandler,
		wantOutcome: dedupe.Ran, wantErr: []error{errHandler}, wantRan: true,
		wantAfter: dedupe.Acquired, // released: the redelivery runs at once
	}, {
		name:        "HandlerErrorHidesSentinels",
		handler:     dedupe.ErrUnrecorded,
		wantOutcome: dedupe.Ran, wantRan: true, wantAfter: dedupe.Acquired,
	}, {
		name:        "Done",
		setup:       func(t *testing.T, s dedupe.Store, _ *dedupetest.FaultStore) { complete(t, s) },
		wantOutcome: dedupe.Suppressed, wantAfter: dedupe.Done,
	}, {
		name: "InFlight",
		setup: func(t *testing.T, s dedupe.Store, _ *dedupetest.FaultStore) {
			claim(t, s, "")
		},
		wantOutcome: dedupe.Deferred, wantErr: []error{dedupe.ErrInFlight}, wantAfter: dedupe.InFlight,
	}, {
		name: "Conflict",
		setup: func(t *testing.T, s dedupe.Store, _ *dedupetest.FaultStore) {
			claim(t, s, "a")
		},
		fp:          "b",
		wantOutcome: dedupe.Deferred, wantErr: []error{dedupe.ErrConflict}, wantAfter: dedupe.InFlight,
	}, {
		name:        "InvalidKey",
		ref:         dedupe.Ref{Group: "g", Key: "bad\n"},
		cfg:         dedupe.GuardConfig{FailOpen: true},
		wantOutcome: dedupe.Deferred, wantErr: []error{dedupe.ErrInvalidKey}, wantAfter: dedupe.Acquired,
	}, {
		name: "StoreDownFailClosed",
		setup: func(t *testing.T, _ dedupe.Store, fs *dedupetest.FaultStore) {
			fs.Inject(dedupetest.Fault{})
		},
		wantOutcome: dedupe.Deferred, wantErr: []error{dedupe.ErrStoreUnavailable, dedupetest.ErrInjected},
		wantAfter: dedupe.Acquired,
	}, {
		name: "StoreDownFailOpen",
		cfg:  dedupe.GuardConfig{FailOpen: true},
		setup: func(t *testing.T, _ dedupe.Store, fs *dedupetest.FaultStore) {
			fs.Inject(dedupetest.Fault{})
		},
		handler:     errHandler,
		wantOutcome: dedupe.Unguarded, wantErr: []error{errHandler}, wantRan: true, wantAfter: dedupe.Acquired,
	}, {
		name: "CompleteFails",
		setup: func(t *testing.T, _ dedupe.Store, fs *dedupetest.FaultStore) {
			fs.Inject(dedupetest.Fault{Ops: dedupetest.OpComplete})
		},
		wantOutcome: dedupe.Ran, wantErr: []error{dedupe.ErrUnrecorded, dedupetest.ErrInjected}, wantRan: true,
		wantAfter: dedupe.InFlight, // until the lease ends
	}, {
		name: "CompleteFailsOnceThenRetried",
		setup: func(t *testing.T, _ dedupe.Store, fs *dedupetest.FaultStore) {
			fs.Inject(dedupetest.Fault{Ops: dedupetest.OpComplete, Nth: 1, After: true})
		},
		wantOutcome: dedupe.Ran, wantRan: true, wantAfter: dedupe.Done,
	}, {
		name: "CompleteAnswerLost",
		setup: func(t *testing.T, _ dedupe.Store, fs *dedupetest.FaultStore) {
			fs.Inject(dedupetest.Fault{Ops: dedupetest.OpComplete, After: true})
		},
		wantOutcome: dedupe.Ran, wantErr: []error{dedupe.ErrUnrecorded}, wantRan: true, wantAfter: dedupe.Done,
	}, {
		name: "ReleaseFails",
		setup: func(t *testing.T, _ dedupe.Store, fs *dedupetest.FaultStore) {
			fs.Inject(dedupetest.Fault{Ops: dedupetest.OpRelease})
		},
		handler:     errHandler,
		wantOutcome: dedupe.Ran, wantErr: []error{errHandler}, wantRan: true,
		wantAfter: dedupe.InFlight, // until the lease ends
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := memdedupe.New(memdedupe.Config{})
			fs := dedupetest.NewFaultStore(mem)
			if tt.setup != nil {
				tt.setup(t, mem, fs)
			}
			r := ref
			if tt.ref != (dedupe.Ref{}) {
				r = tt.ref
			}
			ran := false
			out, err := newGuard(t, fs, tt.cfg).Do(t.Context(), r, tt.fp, func(context.Context) error {
				ran = true
				return tt.handler
			})
			if out != tt.wantOutcome {
				t.Errorf("Do = %v, %v; want outcome %v", out, err, tt.wantOutcome)
			}
			for _, w := range tt.wantErr {
				if !errors.Is(err, w) {
					t.Errorf("Do error = %v, want %v", err, w)
				}
			}
			if len(tt.wantErr) == 0 && err != nil && tt.handler == nil {
				t.Errorf("Do error = %v, want nil", err)
			}
			// A failed handler must never look like a success.
			if tt.handler != nil && (errors.Is(err, dedupe.ErrUnrecorded) || errors.Is(err, dedupe.ErrLeaseLost) || err == nil) {
				t.Errorf("handler failed with %v but Do answered %v", tt.handler, err)
			}
			if ran != tt.wantRan {
				t.Errorf("handler ran: %v, want %v", ran, tt.wantRan)
			}
			if r == ref {
				if got := status(t, mem, ""); got != tt.wantAfter {
					t.Errorf("after Do, Claim = %v, want %v", got, tt.wantAfter)
				}
			}
		})
	}
}

func claim(t *testing.T, s dedupe.Store, fp string) dedupe.Ticket {
	t.Helper()
	res, err := s.Claim(context.Background(), dedupe.ClaimRequest{Ref: ref, Lease: time.Hour, Fingerprint: fp})
	if err != nil || res.Status != dedupe.Acquired {
		t.Fatalf("Claim = %v, %v", res.Status, err)
	}
	return dedupe.Ticket{Ref: ref, Token: res.Token}
}

func complete(t *testing.T, s dedupe.Store) {
	t.Helper()
	if err := s.Complete(context.Background(), claim(t, s, ""), time.Hour); err != nil {
		t.Fatal(err)
	}
}

// TestGuardRedelivery runs the same message through Do until it sticks: a
// failure is retried at once, a success is never repeated.
func TestGuardRedelivery(t *testing.T) {
	g := newGuard(t, memdedupe.New(memdedupe.Config{}), dedupe.GuardConfig{})
	runs := 0
	handler := func(context.Context) error {
		runs++
		if runs == 1 {
			return errHandler
		}
		return nil
	}
	for i, want := range []dedupe.Outcome{dedupe.Ran, dedupe.Ran, dedupe.Suppressed, dedupe.Suppressed} {
		out, _ := g.Do(t.Context(), ref, "", handler)
		if out != want {
			t.Errorf("delivery %d: %v, want %v", i, out, want)
		}
	}
	if runs != 2 {
		t.Errorf("handler ran %d times, want 2", runs)
	}
}

// TestGuardConcurrent delivers one message to many consumers at once: one
// runs it, the others defer or, once it is done, suppress it.
func TestGuardConcurrent(t *testing.T) {
	g := newGuard(t, memdedupe.New(memdedupe.Config{}), dedupe.GuardConfig{})
	var (
		runs atomic.Int32
		wg   sync.WaitGroup
	)
	for range 32 {
		wg.Go(func() {
			out, err := g.Do(t.Context(), ref, "", func(context.Context) error {
				runs.Add(1)
				return nil
			})
			switch {
			case out == dedupe.Ran && err == nil:
			case out == dedupe.Suppressed && err == nil:
			case out == dedupe.Deferred && errors.Is(err, dedupe.ErrInFlight):
			default:
				t.Errorf("Do = %v, %v", out, err)
			}
		})
	}
	wg.Wait()
	if runs.Load() != 1 {
		t.Errorf("handler ran %d times, want 1", runs.Load())
	}
}

// TestGuardExtends runs a handler for several leases while another consumer
// keeps trying to take the key.
func TestGuardExtends(t *testing.T) {
	for _, tt := range []struct {
		name string
		// cancel cancels the caller's context as the handler starts; the
		// handler carries on regardless, and its lease must still hold.
		cancel bool
	}{
		{"CallerWaits", false},
		{"CallerCancelled", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mem := memdedupe.New(memdedupe.Config{})
			fs := dedupetest.NewFaultStore(mem)
			// Eight extensions per lease leave room for a slow, loaded machine.
			const lease = 400 * time.Millisecond
			g := newGuard(t, fs, dedupe.GuardConfig{Lease: lease, ExtendEvery: lease / 8})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			out, err := g.Do(ctx, ref, "", func(context.Context) error {
				if tt.cancel {
					cancel()
				}
				for end := time.Now().Add(3 * lease); time.Now().Before(end); time.Sleep(lease / 4) {
					if got := status(t, mem, ""); got != dedupe.InFlight {
						t.Errorf("while the handler runs, Claim = %v, want in flight", got)
					}
				}
				return nil
			})
			if out != dedupe.Ran || err != nil {
				t.Fatalf("Do = %v, %v", out, err)
			}
			if n := fs.Calls(dedupetest.OpExtend); n < 3 {
				t.Errorf("Extend called %d times in 3 leases, want at least 3", n)
			}
			if got := status(t, mem, ""); got != dedupe.Done {
				t.Errorf("after Do, Claim = %v, want done", got)
			}
		})
	}
}

// TestGuardLeaseLost takes the key over while the handler runs: the store
// then refuses the guard's next extension, and the handler's context is
// cancelled with ErrLeaseLost.
func TestGuardLeaseLost(t *testing.T) {
	for _, tt := range []struct {
		name string
		// obey: the handler stops when cancelled, failing with the cause.
		obey bool
	}{
		{"HandlerStops", true},
		{"HandlerFinishes", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var (
				mu  sync.Mutex
				now = time.Now()
			)
			clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			mem := memdedupe.New(memdedupe.Config{Now: clock})
			g := newGuard(t, mem, dedupe.GuardConfig{Lease: time.Minute, ExtendEvery: 5 * time.Millisecond})
			out, err := g.Do(t.Context(), ref, "", func(ctx context.Context) error {
				mu.Lock()
				now = now.Add(2 * time.Minute) // the store's clock runs past the lease
				mu.Unlock()
				claim(t, mem, "") // another consumer takes the key over
				select {
				case <-ctx.Done():
				case <-time.After(5 * time.Second):
					t.Error("handler context not cancelled after the lease was lost")
				}
				cause := context.Cause(ctx)
				if !errors.Is(cause, dedupe.ErrLeaseLost) {
					t.Errorf("handler context cause = %v, want ErrLeaseLost", cause)
				}
				if tt.obey {
					return errors.Join(errHandler, cause)
				}
				return nil
			})
			if out != dedupe.Ran {
				t.Errorf("Do outcome = %v, want ran", out)
			}
			switch {
			case !tt.obey && !errors.Is(err, dedupe.ErrLeaseLost):
				t.Errorf("Do = %v, want ErrLeaseLost: the effect may have run twice", err)
			case tt.obey && (err == nil || errors.Is(err, dedupe.ErrLeaseLost) || !strings.Contains(err.Error(), "lease lost")):
				t.Errorf("Do = %v: a failed handler must not match ErrLeaseLost, yet say the lease was lost", err)
			}
			if got := status(t, mem, ""); got != dedupe.InFlight {
				t.Errorf("after Do, Claim = %v, want in flight: the new owner's claim untouched", got)
			}
		})
	}
}

// TestGuardCannotExtend fails every extension: once a whole lease has passed
// without one, the handler's context is cancelled, for the store may have
// handed the key to someone else.
func TestGuardCannotExtend(t *testing.T) {
	mem := memdedupe.New(memdedupe.Config{})
	fs := dedupetest.NewFaultStore(mem)
	fs.Inject(dedupetest.Fault{Ops: dedupetest.OpExtend})
	const lease = 100 * time.Millisecond
	g := newGuard(t, fs, dedupe.GuardConfig{Lease: lease, ExtendEvery: lease / 4})
	start := time.Now()
	var stopped time.Duration
	out, err := g.Do(t.Context(), ref, "", func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			stopped = time.Since(start)
		case <-time.After(5 * time.Second):
			t.Error("handler context not cancelled")
		}
		cause := context.Cause(ctx)
		if !errors.Is(cause, dedupe.ErrLeaseLost) || !errors.Is(cause, dedupetest.ErrInjected) {
			t.Errorf("handler context cause = %v, want ErrLeaseLost and the store's error", cause)
		}
		return cause
	})
	if out != dedupe.Ran || err == nil || errors.Is(err, dedupe.ErrLeaseLost) {
		t.Errorf("Do = %v, %v; want ran with the handler's error, not ErrLeaseLost", out, err)
	}
	if stopped < lease {
		t.Errorf("handler cancelled after %v, before the lease of %v could have ended", stopped, lease)
	}
	if n := fs.Calls(dedupetest.OpExtend); n < 2 {
		t.Errorf("Extend tried %d times, want several", n)
	}
}

// TestGuardCleanupAfterCancel cancels the caller's context while the handler
// runs: the claim is still completed or released.
func TestGuardCleanupAfterCancel(t *testing.T) {
	for _, tt := range []struct {
		name      string
		handler   func(ctx context.Context) error
		wantAfter dedupe.Status
	}{
		{"Completes", func(context.Context) error { return nil }, dedupe.Done},
		{"Releases", func(ctx context.Context) error { return ctx.Err() }, dedupe.Acquired},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mem := memdedupe.New(memdedupe.Config{})
			g := newGuard(t, mem, dedupe.GuardConfig{})
			ctx, cancel := context.WithCancel(t.Context())
			out, err := g.Do(ctx, ref, "", func(hctx context.Context) error {
				cancel()
				<-hctx.Done()
				return tt.handler(hctx)
			})
			if out != dedupe.Ran {
				t.Errorf("Do = %v, %v; want ran", out, err)
			}
			if got := status(t, mem, ""); got != tt.wantAfter {
				t.Errorf("after Do, Claim = %v, want %v", got, tt.wantAfter)
			}
		})
	}
}

func TestNewGuard(t *testing.T) {
	mem := memdedupe.New(memdedupe.Config{})
	tests := []struct {
		name  string
		store dedupe.Store
		cfg   dedupe.GuardConfig
		ok    bool
	}{
		{"Defaults", mem, dedupe.GuardConfig{}, true},
		{"NilStore", nil, dedupe.GuardConfig{}, false},
		{"NegativeLease", mem, dedupe.GuardConfig{Lease: -time.Second}, false},
		{"NegativeRetention", mem, dedupe.GuardConfig{Retention: -time.Second}, false},
		{"ExtendEveryLease", mem, dedupe.GuardConfig{Lease: time.Second, ExtendEvery: time.Second}, false},
		{"NegativeCleanup", mem, dedupe.GuardConfig{CleanupTimeout: -time.Second}, false},
		{"Short", mem, dedupe.GuardConfig{Lease: time.Millisecond}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := dedupe.NewGuard(tt.store, tt.cfg)
			if (err == nil) != tt.ok {
				t.Errorf("NewGuard(%+v) = %v, want ok %v", tt.cfg, err, tt.ok)
			}
		})
	}
}
