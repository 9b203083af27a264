package grpcv5

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/apache/rocketmq-clients/golang/v5"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/internal/adapter"
)

// Listener is the message listener of a golang.PushConsumer: pass it with
// golang.WithPushMessageListener. It runs its handler at most once per key
// through a [consumer.Consumer]; [Listener.Drain] stops the push consumer
// without cutting a running handler off. It is safe for concurrent use.
type Listener struct {
	// Its consume method, promoted, makes a *Listener a
	// golang.MessageListener.
	golang.FuncMessageListener
	l *listener[*golang.MessageView]
}

// Push returns the Listener that runs h through c. The push consumer keeps
// a message invisible while the listener runs; a listener that answers
// FAILURE has the client make the message visible after the group's retry
// policy's delay for its attempt, which spends an attempt. A busy key is
// waited for in process up to consumer.WithBusyWait (by default a whole
// lease, which a dead holder lets run out), and a dedupe store that is
// down up to consumer.WithStoreDownWait (10 minutes by default; the proxy
// keeps a message in a listener invisible for up to 3 hours), and either
// on the message's last attempt as long as it lasts (tell the Consumer the
// group's retryMaxTimes with consumer.WithMaxReconsumeTimes); only then is
// it answered FAILURE.
func Push(c *consumer.Consumer, h consumer.Handler) (*Listener, error) {
	if c == nil || h == nil {
		return nil, errors.New("grpcv5: Push: nil Consumer or Handler")
	}
	l := newListener[*golang.MessageView](c, h)
	return &Listener{
		FuncMessageListener: golang.FuncMessageListener{Consume: func(mv *golang.MessageView) golang.ConsumerResult {
			if l.consume(mv) {
				return golang.SUCCESS
			}
			return golang.FAILURE
		}},
		l: l,
	}, nil
}

// stopper is the push consumer [Listener.Drain] stops; a
// golang.PushConsumer is one.
type stopper interface {
	// GracefulStop stops receiving, runs the listener for the messages
	// received already, then stops the client.
	GracefulStop() error
}

// errDrained is the answer of a second [Listener.Drain].
var errDrained = errors.New("grpcv5: drain: already drained")

// Drain stops pc (a golang.PushConsumer) with its GracefulStop, which stops receiving, waits for
// the receives under way (long polls: some 24 s against a 5.5.0 proxy's
// defaults), runs the listener for every message received already and
// shuts the client down: those messages are handled and acknowledged,
// spending nothing. When ctx ends first, the handlers still
// running see their context cancelled, and the messages not yet handled
// are answered FAILURE without running (each spends a delivery attempt);
// Drain still waits for GracefulStop to return. Its error says whether ctx
// ended first, and what GracefulStop answered.
func (l *Listener) Drain(ctx context.Context, pc interface{ GracefulStop() error }) error {
	return l.l.drain(ctx, pc)
}

func wrapStop(err error) error {
	if err != nil {
		return fmt.Errorf("grpcv5: drain: stop the push consumer: %w", err)
	}
	return nil
}

// listener is a Listener of Vs.
type listener[V view] struct {
	c *consumer.Consumer
	h consumer.Handler
	// ctx is the handlers' context: the client gives the listener none.
	// stop cancels it when a drain runs out of time.
	ctx     context.Context
	stop    context.CancelCauseFunc
	running atomic.Int64
	drained atomic.Bool
}

func (l *listener[V]) drain(ctx context.Context, pc stopper) error {
	if !l.drained.CompareAndSwap(false, true) {
		return errDrained
	}
	stopped := make(chan error, 1)
	go func() { stopped <- pc.GracefulStop() }()
	var err error
	select {
	case serr := <-stopped:
		return wrapStop(serr)
	case <-ctx.Done():
		err = fmt.Errorf("grpcv5: drain: %d listeners still running: %w", l.running.Load(), context.Cause(ctx))
		l.stop(ErrDrainTimeout)
	}
	return errors.Join(err, wrapStop(<-stopped))
}

func newListener[V view](c *consumer.Consumer, h consumer.Handler) *listener[V] {
	ctx, stop := context.WithCancelCause(context.Background())
	return &listener[V]{c: c, h: h, ctx: ctx, stop: stop}
}

// consume handles v and reports whether it is to be acknowledged. Any
// other answer is FAILURE: the client makes the message visible again
// after the group's retry policy's delay for its attempt, and the
// redelivery spends an attempt.
func (l *listener[V]) consume(v V) bool {
	l.running.Add(1)
	defer l.running.Add(-1)
	// A busy key is waited for up to consumer.WithBusyWait (a lease by
	// default), a store that is down up to consumer.WithStoreDownWait, and
	// on the message's last attempt as long as either lasts
	// (consumer.WithMaxReconsumeTimes: the group's retryMaxTimes).
	vs := adapter.Process(l.ctx, l.c, []consumer.Message{describe(v)}, l.h, adapter.Waiting{}, nil)
	return vs[0].Action == adapter.Ack
}

var (
	_ golang.MessageListener = (*Listener)(nil)
	_ stopper                = golang.PushConsumer(nil)
)
