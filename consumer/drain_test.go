package consumer_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/internal/adapter"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
)

// events is a log of what happened, in order, from any goroutine.
type events struct {
	mu  sync.Mutex
	evs []string
}

func (e *events) add(ev string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evs = append(e.evs, ev)
}

func (e *events) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.evs)
}

func (e *events) has(ev string) bool { return slices.Contains(e.list(), ev) }

// before fails t unless a happened, and before b if b happened.
func (e *events) before(t *testing.T, a, b string) {
	t.Helper()
	evs := e.list()
	i, j := slices.Index(evs, a), slices.Index(evs, b)
	if i < 0 || j >= 0 && j < i {
		t.Errorf("events %q: want %q before %q", evs, a, b)
	}
}

// drainEnv is a Consumer whose store and client note what they do in ev,
// with a handler that notes each run and, for key "slow", waits for
// release or for its context to end.
type drainEnv struct {
	t       *testing.T
	ev      *events
	mem     *memdedupe.Store
	c       *consumer.Consumer
	w       adapter.Waiting
	stops   atomic.Int32
	stopErr error // the client's answer to stop
	release chan struct{}
	// slowErr is what the slow handler returns once released.
	slowErr error
	// canceled receives the cause with which the slow handler's context
	// ended, if it did.
	canceled chan error
}

func newDrainEnv(t *testing.T, w adapter.Waiting) *drainEnv {
	t.Helper()
	ev := new(events)
	e := &drainEnv{t: t, ev: ev, mem: memdedupe.New(memdedupe.Config{}), w: w, release: make(chan struct{}), canceled: make(chan error, 1)}
	e.c = newConsumer(t, &testkit.HookStore{Store: e.mem, Hooks: testkit.StoreHooks{
		// Note the completions and releases.
		Complete: func(_ context.Context, ts []dedupe.Ticket) error { ev.add("complete " + ts[0].Ref.Key); return nil },
		Release:  func(_ context.Context, ts []dedupe.Ticket) error { ev.add("release " + ts[0].Ref.Key); return nil },
	}})
	return e
}

func (e *drainEnv) handle(ctx context.Context, m *consumer.Message) error {
	k := msgkey.Of(m)
	e.ev.add("run " + k)
	if k != "slow" {
		return nil
	}
	select {
	case <-e.release:
		e.ev.add("released " + k)
		return e.slowErr
	case <-ctx.Done():
		e.canceled <- context.Cause(ctx)
		return ctx.Err()
	}
}

// stop is the client's shutdown.
func (e *drainEnv) stop() error {
	e.stops.Add(1)
	e.ev.add("stopped")
	return e.stopErr
}

// deliver processes a message with key in a goroutine, notes "returned
// <key>" when Process returns, and answers on the channel.
func (e *drainEnv) deliver(ctx context.Context, key string) <-chan adapter.Verdict {
	done := make(chan adapter.Verdict, 1)
	go func() {
		v := adapter.Process(ctx, e.c, msgs(key), e.handle, e.w, nil)[0]
		e.ev.add("returned " + key)
		done <- v
	}()
	return done
}

// drain runs Drain with ctx in a goroutine. Once Drain waits on ctx, which
// it does only after it has stopped Process from starting handlers and
// while a handler runs, "drain waits" is noted.
func (e *drainEnv) drain(ctx context.Context) <-chan error {
	done := make(chan error, 1)
	go func() { done <- adapter.Drain(notingContext{ctx, e.ev}, e.c, e.stop) }()
	return done
}

// notingContext notes "drain waits" whenever its Done is asked for.
type notingContext struct {
	context.Context
	ev *events
}

func (c notingContext) Done() <-chan struct{} {
	c.ev.add("drain waits")
	return c.Context.Done()
}

// free reports whether key is unclaimed in the store.
func (e *drainEnv) free(key string) bool {
	e.t.Helper()
	ref := dedupe.Ref{Group: testGroup, Key: key}
	res, err := testkit.Claim(context.Background(), e.mem, dedupe.Item{Ref: ref}, time.Minute)
	if err != nil {
		e.t.Fatal(err)
	}
	if res.Outcome == dedupe.Acquired {
		if err := testkit.Release(context.Background(), e.mem, dedupe.Ticket{Ref: ref, Token: res.Token}); err != nil {
			e.t.Fatal(err)
		}
	}
	return res.Outcome == dedupe.Acquired
}

// held reports whether v is a drain's hold.
func held(v adapter.Verdict) bool {
	return v.Action == adapter.Hold && errors.Is(v.Err, adapter.ErrDraining) && v.Delay == 0
}

// waitings are the two ways a client waits: those that hand messages back
// (Concurrently, Push) and those that keep them (Orderly, Simple).
var waitings = []struct {
	name string
	w    adapter.Waiting
}{{"HandsBack", adapter.Waiting{}}, {"Always", adapter.Waiting{Always: true}}}

// TestDrainWaitsForRunningHandler drains while a handler runs: the client
// stops only once the handler has finished and its key is recorded. A
// delivery meanwhile does not run its handler, and returns, held, only
// after the client stopped.
func TestDrainWaitsForRunningHandler(t *testing.T) {
	for _, wt := range waitings {
		t.Run(wt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			e := newDrainEnv(t, wt.w)
			running := e.deliver(context.Background(), "slow")
			testkit.WaitFor(t, "the handler to run", func() bool { return e.ev.has("run slow") })

			drained := e.drain(context.Background())
			testkit.WaitFor(t, "Drain to wait for the handler", func() bool { return e.ev.has("drain waits") })
			late := e.deliver(context.Background(), "late")
			// Time for a late delivery that would not wait to return, and
			// for a Drain that would not wait to stop the client.
			time.Sleep(20 * time.Millisecond)
			close(e.release)

			if err := <-drained; err != nil {
				t.Errorf("Drain = %v", err)
			}
			if v := <-running; v.Action != adapter.Ack {
				t.Errorf("running delivery: %+v; want Ack", v)
			}
			if v := <-late; !held(v) {
				t.Errorf("late delivery: %+v; want held, draining", v)
			}
			e.ev.before(t, "drain waits", "released slow")
			e.ev.before(t, "released slow", "complete slow")
			e.ev.before(t, "complete slow", "stopped")
			e.ev.before(t, "stopped", "returned late")
			if e.ev.has("run late") || !e.free("late") {
				t.Errorf("events %q: the late message ran or holds its key", e.ev.list())
			}
			if n := e.stops.Load(); n != 1 {
				t.Errorf("stopped %d times, want 1", n)
			}
			s := e.c.Stats()
			if s.Completed != 1 || s.Canceled != 1 {
				t.Errorf("completed %d, held %d; want 1 and 1", s.Completed, s.Canceled)
			}
			checkTotals(t, s)
		})
	}
}

// TestDrainHoldsInsteadOfRetrying drains while deliveries are under way
// that would retry their messages: a busy key's wait, and a handler that
// fails once the drain has begun. Their messages are held — neither
// acknowledged nor sent back before the client stops, so that they spend
// no reconsume — and Drain does not wait for them.
func TestDrainHoldsInsteadOfRetrying(t *testing.T) {
	tests := []struct {
		name string
		// start delivers and returns once the delivery is under way.
		start func(e *drainEnv) <-chan adapter.Verdict
		// key is the delivery's; free: it must end up unclaimed.
		key  string
		free bool
		// running: the delivery runs a handler, which Drain waits for.
		running bool
	}{{
		name: "BusyWait", key: "busy",
		start: func(e *drainEnv) <-chan adapter.Verdict {
			hold(e.t, e.mem, "busy", time.Minute)
			done := e.deliver(context.Background(), "busy")
			testkit.WaitFor(e.t, "Process to wait", func() bool { return e.c.Stats().Waited > 0 })
			return done
		},
	}, {
		name: "FailsDuringDrain", key: "slow", free: true, running: true,
		start: func(e *drainEnv) <-chan adapter.Verdict {
			e.slowErr = errors.New("declined")
			done := e.deliver(context.Background(), "slow")
			testkit.WaitFor(e.t, "the handler to run", func() bool { return e.ev.has("run slow") })
			return done
		},
	}}
	for _, wt := range waitings {
		for _, tt := range tests {
			t.Run(wt.name+"/"+tt.name, func(t *testing.T) {
				defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
				e := newDrainEnv(t, wt.w)
				under := tt.start(e)
				// Generous: Drain should not wait for held deliveries at all.
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				drained := e.drain(ctx)
				if tt.running {
					testkit.WaitFor(t, "Drain to wait for the handler", func() bool { return e.ev.has("drain waits") })
				}
				close(e.release)

				if err := <-drained; err != nil {
					t.Errorf("Drain = %v, want nil: a held delivery runs no handler", err)
				}
				if v := <-under; !held(v) {
					t.Errorf("verdict %+v; want held", v)
				}
				e.ev.before(t, "stopped", "returned "+tt.key)
				if e.ev.has("run busy") {
					t.Error("the busy message ran during the drain")
				}
				if tt.free && !e.free(tt.key) {
					t.Errorf("%s is still claimed", tt.key)
				}
				checkTotals(t, e.c.Stats())
			})
		}
	}
}

// TestDrainTimeout drains with a context that ends while a handler still
// runs: the handler's context is cancelled, its claim released, and Drain
// says how many deliveries were still running.
func TestDrainTimeout(t *testing.T) {
	parents := []struct {
		name string
		ctx  func(t *testing.T) context.Context
	}{
		// The client's context, which nothing cancels.
		{"ClientContext", func(*testing.T) context.Context { return context.Background() }},
		{"CancellableContext", func(t *testing.T) context.Context { return t.Context() }},
	}
	for _, wt := range waitings {
		for _, p := range parents {
			t.Run(wt.name+"/"+p.name, func(t *testing.T) {
				defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
				e := newDrainEnv(t, wt.w)
				running := e.deliver(p.ctx(t), "slow")
				testkit.WaitFor(t, "the handler to run", func() bool { return e.ev.has("run slow") })

				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				defer cancel()
				err := <-e.drain(ctx)
				if err == nil || !strings.Contains(err.Error(), "1 callbacks still running") || !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Drain = %v; want the count of running deliveries and DeadlineExceeded", err)
				}
				if cause := <-e.canceled; cause == nil {
					t.Error("the handler's context ended without a cause")
				}
				if v := <-running; !held(v) {
					t.Errorf("verdict %+v; want held", v)
				}
				e.ev.before(t, "stopped", "returned slow")
				e.ev.before(t, "release slow", "returned slow")
				if !e.free("slow") {
					t.Error("the cancelled handler's key is still claimed")
				}
				if n := e.stops.Load(); n != 1 {
					t.Errorf("stopped %d times, want 1", n)
				}
			})
		}
	}
}

// TestDrainOnce drains twice, with the client's stop failing, and
// delivers after the drain: the message is held, counted, and not run.
func TestDrainOnce(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	e := newDrainEnv(t, adapter.Waiting{})
	e.stopErr = errors.New("offsets not persisted")
	if err := adapter.Drain(context.Background(), e.c, e.stop); !errors.Is(err, e.stopErr) {
		t.Errorf("Drain = %v, want it to wrap %v", err, e.stopErr)
	}
	if err := adapter.Drain(context.Background(), e.c, e.stop); err == nil || !strings.Contains(err.Error(), "already drained") {
		t.Errorf("second Drain = %v, want an error", err)
	}
	if n := e.stops.Load(); n != 1 {
		t.Errorf("stopped %d times, want 1", n)
	}
	for _, wt := range waitings {
		if v := adapter.Process(context.Background(), e.c, msgs("after"), e.handle, wt.w, nil)[0]; !held(v) {
			t.Errorf("%s after Drain: %+v; want held", wt.name, v)
		}
	}
	if e.ev.has("run after") || !e.free("after") {
		t.Errorf("events %q: a message delivered after the drain ran or holds its key", e.ev.list())
	}
	s := e.c.Stats()
	if s.Delivered != 2 || s.Canceled != 2 {
		t.Errorf("delivered %d, held %d; want 2 and 2", s.Delivered, s.Canceled)
	}
	checkTotals(t, s)
}
