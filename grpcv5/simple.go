package grpcv5

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/rocketmq-clients/golang/v5"
	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/internal/adapter"
)

// SimpleConfig holds a [Receiver]'s optional settings. The zero value works.
type SimpleConfig struct {
	// Workers bounds the messages in hand at once, each handled in a
	// goroutine of its own. Default 20, as the push consumer's
	// consumption goroutines.
	Workers int
	// BatchSize bounds the messages one Receive asks for. Default 16; the
	// proxy serves at most 32.
	BatchSize int32
	// InvisibleDuration is how long a received message stays invisible to
	// other consumers; it is renewed while the message is in hand, so it
	// bounds how soon a message comes back after this process dies, not
	// how long a handler may run. Default 30s; the proxy refuses less than
	// 10s by default.
	InvisibleDuration time.Duration
	// DrainTimeout bounds how long [Receiver.Run], once stopped, waits for
	// a Receive under way and the messages in hand before it cancels the
	// Receive and the handlers' contexts. Default 30s.
	DrainTimeout time.Duration
}

func (c *SimpleConfig) setDefaults() {
	if c.Workers == 0 {
		c.Workers = 20
	}
	if c.BatchSize == 0 {
		c.BatchSize = 16
	}
	if c.InvisibleDuration == 0 {
		c.InvisibleDuration = 30 * time.Second
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 30 * time.Second
	}
}

// validate reports settings that cannot work.
func (c SimpleConfig) validate() error {
	switch {
	case c.Workers < 1:
		return fmt.Errorf("grpcv5: %d workers, want at least 1", c.Workers)
	case c.BatchSize < 1 || c.BatchSize > 32:
		return fmt.Errorf("grpcv5: batch size %d, want 1 to 32", c.BatchSize)
	case c.InvisibleDuration < time.Second:
		return fmt.Errorf("grpcv5: invisible duration %v, want at least 1s (the proxy's default minimum is 10s)", c.InvisibleDuration)
	case c.DrainTimeout <= 0:
		return fmt.Errorf("grpcv5: drain timeout %v must be positive", c.DrainTimeout)
	}
	return nil
}

// ErrDrainTimeout is in the error of a [Receiver]'s Run, and the cause of
// its handlers' contexts, when handlers were still running when the drain
// ran out of time; their contexts were cancelled.
var ErrDrainTimeout = errors.New("grpcv5: drain ran out of time")

// errClosed is Run's answer after Close, or a second time: a misuse.
var errClosed = errors.New("grpcv5: receiver closed")

// Receiver runs a receive loop on a golang.SimpleConsumer: it receives
// messages, handles each in a goroutine of its own (up to
// [SimpleConfig.Workers] at once) through the [consumer.Consumer], and
// acknowledges those the Consumer acknowledges. While a message is in hand
// its invisible duration is renewed, so a long handler does not make it
// visible to others. It is safe for concurrent use.
//
// A message whose key another consumer holds never spends an attempt while
// this process lives: it stays in hand, its invisible duration extended to
// at least the holder's remaining lease plus a margin, until the holder
// completes the key (the message is suppressed and acknowledged) or
// releases it or dies (the key is claimed and the handler runs). Nor does
// one whose claim finds the dedupe store down: it stays in hand, renewed,
// until the store answers again, however long that takes. Should
// this process die meanwhile, the message comes back once the holder's
// lease has ended. Unlike the remoting client's offsets, a 5.x receipt
// cannot be handed back unspent: a message a drain runs out of time for,
// and every message in hand when the process dies, spends an attempt.
type Receiver struct {
	r *receiver[*golang.MessageView]
}

// Simple returns a Receiver that runs h for the messages sc receives, at
// most once per key, through c. Call [Receiver.Run] to start it. The
// caller starts and subscribes sc, and stops it (GracefulStop) once
// [Receiver.Run] has returned.
func Simple(c *consumer.Consumer, sc golang.SimpleConsumer, h consumer.Handler, cfg SimpleConfig) (*Receiver, error) {
	if c == nil || sc == nil || h == nil {
		return nil, errors.New("grpcv5: Simple: nil Consumer, SimpleConsumer or Handler")
	}
	r, err := newReceiver(c, handleFixer{sc}, h, cfg)
	if err != nil {
		return nil, err
	}
	return &Receiver{r}, nil
}

// Run receives and handles messages until ctx ends or Close is called,
// then drains: it stops receiving (a Receive under way finishes, and its
// messages are handled), lets the messages in hand finish, and returns,
// all within [SimpleConfig.DrainTimeout]. A Receive still under way then is
// cancelled: messages the proxy had already taken for it come back when
// their invisible duration ends, on their next attempt. Messages still in hand then
// are left unacknowledged. Its error wraps [ErrDrainTimeout] when the
// drain ran out of time, and says the receiver is closed when Run ran
// before.
func (r *Receiver) Run(ctx context.Context) error { return r.r.run(ctx) }

// Close stops Run, waits until it has drained and returns what it
// returned (nil if Run never ran); afterwards Run fails at once.
func (r *Receiver) Close() error { return r.r.close() }

// client is what a receiver uses of a simple consumer receiving Vs.
type client[V view] interface {
	Receive(ctx context.Context, maxMessageNum int32, invisibleDuration time.Duration) ([]V, error)
	Ack(ctx context.Context, v V) error
	ChangeInvisibleDuration(v V, invisibleDuration time.Duration) error
}

// handleFixer is a golang.SimpleConsumer whose ChangeInvisibleDuration keeps the
// message's receipt handle when the proxy refuses the change:
// rocketmq-clients v5.1.4 replaces it with the refusal's, which is empty,
// so that every later call for the message would fail. (A change that
// succeeds returns a new handle, which replaces the old one.)
type handleFixer struct{ golang.SimpleConsumer }

func (f handleFixer) ChangeInvisibleDuration(mv *golang.MessageView, d time.Duration) error {
	old := mv.ReceiptHandle
	err := f.SimpleConsumer.ChangeInvisibleDuration(mv, d)
	if err != nil && mv.ReceiptHandle == "" {
		mv.ReceiptHandle = old
	}
	return err
}

// receiver is a Receiver of Vs.
type receiver[V view] struct {
	c   *consumer.Consumer
	sc  client[V]
	h   consumer.Handler
	cfg SimpleConfig
	log *slog.Logger

	mu     sync.Mutex
	state  runState
	cancel context.CancelFunc // ends the running loop
	done   chan struct{}      // closed once run has returned
	err    error              // what run returned
	hands  map[*hand[V]]struct{}
}

type runState uint8

const (
	idle runState = iota
	running
	closed
)

// receiveBackoff is the pause after a failed Receive.
const receiveBackoff = time.Second

func newReceiver[V view](c *consumer.Consumer, sc client[V], h consumer.Handler, cfg SimpleConfig) (*receiver[V], error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &receiver[V]{c: c, sc: sc, h: h, cfg: cfg, log: adapter.Logger(c), done: make(chan struct{}), hands: map[*hand[V]]struct{}{}}, nil
}

func (r *receiver[V]) run(ctx context.Context) error {
	r.mu.Lock()
	if r.state != idle {
		r.mu.Unlock()
		return errClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.state, r.cancel = running, cancel
	r.mu.Unlock()

	err := r.loop(ctx)
	r.mu.Lock()
	r.state, r.err = closed, err
	r.mu.Unlock()
	close(r.done)
	return err
}

func (r *receiver[V]) close() error {
	r.mu.Lock()
	switch r.state {
	case idle:
		r.state = closed
		close(r.done)
	case running:
		r.cancel()
	}
	r.mu.Unlock()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// loop receives until ctx ends, then drains.
func (r *receiver[V]) loop(ctx context.Context) error {
	// The handlers' context outlives ctx by the drain.
	work, stopWork := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopWork(nil)
	renewing := make(chan struct{})
	renewed := make(chan struct{})
	go r.renew(renewing, renewed)
	defer func() {
		close(renewing)
		<-renewed
	}()

	// The drain's one bound starts when ctx ends. A Receive under way then
	// may finish within it (its messages are handled, costing no attempt);
	// a proxy holds an idle long poll open for about the request's
	// deadline, so the bound cuts it short.
	recv, stopRecv := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRecv()
	drainBy := make(chan time.Time, 1)
	var cutRecv atomic.Pointer[time.Timer]
	defer context.AfterFunc(ctx, func() {
		cutRecv.Store(time.AfterFunc(r.cfg.DrainTimeout, stopRecv))
		drainBy <- time.Now().Add(r.cfg.DrainTimeout)
	})()
	defer func() {
		if t := cutRecv.Load(); t != nil {
			t.Stop()
		}
	}()

	var wg sync.WaitGroup
	slots := make(chan struct{}, r.cfg.Workers)
	for ctx.Err() == nil {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		n := int32(1)
		for n < r.cfg.BatchSize && len(slots) < cap(slots) {
			slots <- struct{}{}
			n++
		}
		// Not cancelled with ctx: what the proxy hands over is invisible
		// to others until its invisible duration ends, and handled here
		// costs no delivery attempt.
		received := time.Now()
		vs, err := r.sc.Receive(recv, n, r.cfg.InvisibleDuration)
		for range max(int(n)-len(vs), 0) {
			<-slots
		}
		for i, v := range vs {
			if i >= int(n) {
				slots <- struct{}{}
			}
			h := r.take(v, received.Add(r.cfg.InvisibleDuration))
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				r.handle(work, h)
			}()
		}
		if err != nil && !noMessage(err) && recv.Err() == nil {
			r.log.WarnContext(ctx, "idemq: receive failed; trying again", "err", err, "after", receiveBackoff)
			sleep(ctx, receiveBackoff)
		}
	}

	idle := make(chan struct{})
	go func() {
		wg.Wait()
		close(idle)
	}()
	t := time.NewTimer(time.Until(<-drainBy))
	defer t.Stop()
	select {
	case <-idle:
		return nil
	case <-t.C:
	}
	n := r.inHand()
	if n == 0 { // the last handlers are returning (or a cut Receive took all the time)
		<-idle
		return nil
	}
	stopWork(ErrDrainTimeout)
	<-idle
	return fmt.Errorf("%w after %v: %d messages were in hand, left unacknowledged", ErrDrainTimeout, r.cfg.DrainTimeout, n)
}

// noMessage reports whether err is a Receive's answer that there was
// nothing to receive.
func noMessage(err error) bool {
	s, ok := golang.AsErrRpcStatus(err)
	return ok && s.GetCode() == int32(v2.Code_MESSAGE_NOT_FOUND)
}

// sleep waits for d or the end of ctx.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// handle runs h's message through the Consumer and does what it decided.
func (r *receiver[V]) handle(ctx context.Context, h *hand[V]) {
	defer r.drop(h)
	vs := adapter.Process(ctx, r.c, []consumer.Message{describe(h.v)}, r.h,
		// In hand, a message costs nothing: wait for a busy key as long as
		// its holder holds it, invisible to others meanwhile.
		adapter.Waiting{Always: true, Extend: func(_ int, lease time.Duration) { r.extend(h, lease) }}, nil)
	switch v := vs[0]; v.Action {
	case adapter.Ack:
		r.ack(ctx, h)
	case adapter.Retry:
		// Visible again after the delay, on its next delivery attempt.
		r.release(h, v.Delay)
	case adapter.Hold:
		// Left alone: visible again once its invisible duration ends.
		r.release(h, 0)
	}
}
