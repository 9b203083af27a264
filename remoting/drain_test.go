package remoting_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"go.uber.org/goleak"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/remoting"
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

// fakeClient is a push consumer that notes its calls in ev.
type fakeClient struct {
	ev        *events
	err       error // Shutdown's answer
	shutdowns atomic.Int32
}

func (f *fakeClient) Shutdown() error {
	f.shutdowns.Add(1)
	f.ev.add("shutdown")
	return f.err
}

// drainEnv is a Consumer whose store and push consumer note what they do
// in ev, with a handler that notes each run and, for key "slow", waits
// for release or for its context to end.
type drainEnv struct {
	t       *testing.T
	ev      *events
	mem     *memdedupe.Store
	c       *consumer.Consumer
	pc      *fakeClient
	release chan struct{}
	// slowErr is what the slow handler returns once released.
	slowErr error
	// canceled receives the cause with which the slow handler's context
	// ended, if it did.
	canceled chan error
}

func newDrainEnv(t *testing.T, opts ...consumer.Option) *drainEnv {
	t.Helper()
	ev := new(events)
	e := &drainEnv{t: t, ev: ev, mem: memdedupe.New(memdedupe.Config{}), pc: &fakeClient{ev: ev},
		release: make(chan struct{}), canceled: make(chan error, 1)}
	e.c, _ = newConsumer(t, &testkit.HookStore{Store: e.mem, Hooks: testkit.StoreHooks{
		// Note the completions and releases.
		Complete: func(_ context.Context, ts []dedupe.Ticket) error { ev.add("complete " + ts[0].Ref.Key); return nil },
		Release:  func(_ context.Context, ts []dedupe.Ticket) error { ev.add("release " + ts[0].Ref.Key); return nil },
	}}, opts...)
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

// answer is what a callback returned.
type answer struct {
	res rmq.ConsumeResult
	err error
}

// deliver runs cb with msgs in a goroutine, notes "returned <name>" when it
// returns, and answers on the channel.
func (e *drainEnv) deliver(ctx context.Context, cb remoting.Callback, name string, msgs ...*primitive.MessageExt) <-chan answer {
	done := make(chan answer, 1)
	go func() {
		res, err := cb(ctx, msgs...)
		e.ev.add("returned " + name)
		done <- answer{res, err}
	}()
	return done
}

// drain runs Drain with ctx in a goroutine. Once Drain waits on ctx, which
// it does only after it has stopped callbacks from starting handlers and
// while a handler runs, "drain waits" is noted.
func (e *drainEnv) drain(ctx context.Context) <-chan error {
	done := make(chan error, 1)
	go func() { done <- remoting.Drain(notingContext{ctx, e.ev}, e.c, e.pc) }()
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

// callbacks are the two ways to adapt a handler.
var callbacks = []struct {
	name string
	cb   func(*consumer.Consumer, consumer.Handler) remoting.Callback
}{
	{"Concurrently", remoting.Concurrently},
	{"Orderly", orderly},
}

// TestDrainWaitsForRunningHandler drains while a handler runs: the push
// consumer shuts down only once the handler has finished and its key is
// recorded. A callback delivered meanwhile does not run its handler, and
// returns, unacknowledged, only after the shutdown.
func TestDrainWaitsForRunningHandler(t *testing.T) {
	for _, cbk := range callbacks {
		t.Run(cbk.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			e := newDrainEnv(t)
			cb := cbk.cb(e.c, e.handle)
			running := e.deliver(context.Background(), cb, "slow", msg("slow"))
			testkit.WaitFor(t, "the handler to run", func() bool { return e.ev.has("run slow") })

			drained := e.drain(context.Background())
			testkit.WaitFor(t, "Drain to wait for the handler", func() bool { return e.ev.has("drain waits") })
			late := e.deliver(context.Background(), cb, "late", msg("late"))
			// Time for a late callback that would not wait to return, and
			// for a Drain that would not wait to shut the client down.
			time.Sleep(20 * time.Millisecond)
			close(e.release)

			if err := <-drained; err != nil {
				t.Errorf("Drain = %v", err)
			}
			if a := <-running; a.res != rmq.ConsumeSuccess || a.err != nil {
				t.Errorf("running callback = %v, %v; want success", a.res, a.err)
			}
			a := <-late
			if a.res != rmq.ConsumeRetryLater || a.err == nil || !strings.Contains(a.err.Error(), "draining") {
				t.Errorf("late callback = %v, %v; want retry later, draining", a.res, a.err)
			}
			e.ev.before(t, "drain waits", "released slow")
			e.ev.before(t, "released slow", "complete slow")
			e.ev.before(t, "complete slow", "shutdown")
			e.ev.before(t, "shutdown", "returned late")
			if e.ev.has("run late") || !e.free("late") {
				t.Errorf("events %q: the late message ran or holds its key", e.ev.list())
			}
			if n := e.pc.shutdowns.Load(); n != 1 {
				t.Errorf("shut down %d times, want 1", n)
			}
			s := e.c.Stats()
			if s.Completed.Load() != 1 || s.Canceled.Load() != 1 {
				t.Errorf("completed %d, held %d; want 1 and 1", s.Completed.Load(), s.Canceled.Load())
			}
			checkTotals(t, s)
		})
	}
}

// TestDrainHoldsInsteadOfRetrying drains while callbacks are under way that
// would retry their messages: a busy key's wait, and a handler that fails
// once the drain has begun. Their messages are held — neither acknowledged
// nor sent back before the client shuts down, so that they spend no
// reconsume — and Drain does not wait for them.
func TestDrainHoldsInsteadOfRetrying(t *testing.T) {
	tests := []struct {
		name string
		// start delivers the callback and returns once it is under way.
		start func(e *drainEnv, cb remoting.Callback) <-chan answer
		// returned is the callback's name in the events; free, if set,
		// a key that must end up unclaimed.
		returned, free string
		// running: the callback runs a handler, which Drain waits for.
		running bool
	}{{
		name: "BusyWait",
		start: func(e *drainEnv, cb remoting.Callback) <-chan answer {
			hold(e.t, e.mem, "busy", time.Minute)
			done := e.deliver(context.Background(), cb, "busy", msg("busy"))
			testkit.WaitFor(e.t, "the callback to wait", func() bool { return e.c.Stats().Waited.Load() > 0 })
			return done
		},
		returned: "busy",
	}, {
		name: "FailsDuringDrain",
		start: func(e *drainEnv, cb remoting.Callback) <-chan answer {
			e.slowErr = errors.New("declined")
			done := e.deliver(context.Background(), cb, "slow", msg("slow"))
			testkit.WaitFor(e.t, "the handler to run", func() bool { return e.ev.has("run slow") })
			return done
		},
		returned: "slow", free: "slow", running: true,
	}}
	for _, cbk := range callbacks {
		for _, tt := range tests {
			t.Run(cbk.name+"/"+tt.name, func(t *testing.T) {
				defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
				e := newDrainEnv(t)
				under := tt.start(e, cbk.cb(e.c, e.handle))
				// Generous: Drain should not wait for held callbacks at all.
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				drained := e.drain(ctx)
				if tt.running {
					testkit.WaitFor(t, "Drain to wait for the handler", func() bool { return e.ev.has("drain waits") })
				}
				close(e.release)

				if err := <-drained; err != nil {
					t.Errorf("Drain = %v, want nil: a held callback runs no handler", err)
				}
				a := <-under
				if a.res != rmq.ConsumeRetryLater || a.err == nil {
					t.Errorf("callback = %v, %v; want retry later", a.res, a.err)
				}
				e.ev.before(t, "shutdown", "returned "+tt.returned)
				if e.ev.has("run busy") {
					t.Error("the busy message ran during the drain")
				}
				if tt.free != "" && !e.free(tt.free) {
					t.Errorf("%s is still claimed", tt.free)
				}
				checkTotals(t, e.c.Stats())
			})
		}
	}
}

// TestDrainCountsHeld checks that a message a drain holds is counted, as
// Stats documents: delivered, and held.
func TestDrainCountsHeld(t *testing.T) {
	e := newDrainEnv(t)
	cb := remoting.Concurrently(e.c, e.handle)
	if err := <-e.drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if res, err := cb(context.Background(), msg("late")); res != rmq.ConsumeRetryLater || err == nil {
		t.Fatalf("callback after Drain = %v, %v; want retry later", res, err)
	}
	s := e.c.Stats()
	if s.Delivered.Load() != 1 || s.Canceled.Load() != 1 {
		t.Errorf("delivered %d, held %d; want 1 and 1", s.Delivered.Load(), s.Canceled.Load())
	}
	checkTotals(t, s)
}

// TestDrainTimeout drains with a context that ends while a handler still
// runs: the handler's context is cancelled, its claim released, and Drain
// says how many callbacks were still running.
func TestDrainTimeout(t *testing.T) {
	parents := []struct {
		name string
		ctx  func(t *testing.T) context.Context
	}{
		// The client's context, which nothing cancels.
		{"ClientContext", func(*testing.T) context.Context {
			return primitive.WithConcurrentlyCtx(context.Background(), &primitive.ConsumeConcurrentlyContext{})
		}},
		{"CancellableContext", func(t *testing.T) context.Context { return t.Context() }},
	}
	for _, cbk := range callbacks {
		for _, p := range parents {
			t.Run(cbk.name+"/"+p.name, func(t *testing.T) {
				defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
				e := newDrainEnv(t)
				running := e.deliver(p.ctx(t), cbk.cb(e.c, e.handle), "slow", msg("slow"))
				testkit.WaitFor(t, "the handler to run", func() bool { return e.ev.has("run slow") })

				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				defer cancel()
				err := <-e.drain(ctx)
				if err == nil || !strings.Contains(err.Error(), "1 callbacks still running") || !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Drain = %v; want the count of running callbacks and DeadlineExceeded", err)
				}
				if cause := <-e.canceled; cause == nil {
					t.Error("the handler's context ended without a cause")
				}
				a := <-running
				if a.res != rmq.ConsumeRetryLater || a.err == nil {
					t.Errorf("callback = %v, %v; want retry later", a.res, a.err)
				}
				e.ev.before(t, "shutdown", "returned slow")
				e.ev.before(t, "release slow", "returned slow")
				if !e.free("slow") {
					t.Error("the cancelled handler's key is still claimed")
				}
				if n := e.pc.shutdowns.Load(); n != 1 {
					t.Errorf("shut down %d times, want 1", n)
				}
			})
		}
	}
}

// TestDrainOnce drains twice, and delivers after the drain.
func TestDrainOnce(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	e := newDrainEnv(t)
	if err := remoting.Drain(context.Background(), e.c, e.pc); err != nil {
		t.Fatal(err)
	}
	if err := remoting.Drain(context.Background(), e.c, e.pc); err == nil || !strings.Contains(err.Error(), "already drained") {
		t.Errorf("second Drain = %v, want an error", err)
	}
	if n := e.pc.shutdowns.Load(); n != 1 {
		t.Errorf("shut down %d times, want 1", n)
	}
	for _, cbk := range callbacks {
		res, err := cbk.cb(e.c, e.handle)(context.Background(), msg("after"))
		if res != rmq.ConsumeRetryLater || err == nil {
			t.Errorf("%s after Drain = %v, %v; want retry later", cbk.name, res, err)
		}
	}
	if e.ev.has("run after") || !e.free("after") {
		t.Errorf("events %q: a message delivered after the drain ran or holds its key", e.ev.list())
	}
}

// TestDrainShutdownError checks that Drain reports a failed Shutdown.
func TestDrainShutdownError(t *testing.T) {
	e := newDrainEnv(t)
	errShut := errors.New("offsets not persisted")
	e.pc.err = errShut
	if err := remoting.Drain(context.Background(), e.c, e.pc); !errors.Is(err, errShut) {
		t.Errorf("Drain = %v, want it to wrap %v", err, errShut)
	}
}
