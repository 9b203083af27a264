package grpcv5

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-clients/golang/v5"

	"github.com/idemq/idemq/consumer"
)

// TestPushListener checks the public wiring: a *Listener is the client's
// MessageListener, and a message without a key is answered FAILURE.
func TestPushListener(t *testing.T) {
	c := newConsumer(t, newStore())
	if _, err := Push(nil, nil); err == nil {
		t.Error("Push(nil, nil) succeeded")
	}
	l, err := Push(c, func(context.Context, *consumer.Message) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Consume(&golang.MessageView{}); got != golang.FAILURE {
		t.Errorf("a message without a key: %v, want FAILURE", got)
	}
	if c.Stats().NoKey != 1 {
		t.Errorf("no key counted %d times, want 1", c.Stats().NoKey)
	}
}

// fakeStopper is a push consumer whose GracefulStop, as the client's,
// runs the listener for the messages received already, then returns.
type fakeStopper struct {
	l       *listener[*fakeView]
	pending []*fakeView
	mu      sync.Mutex
	answers []bool
	err     error
}

func (f *fakeStopper) GracefulStop() error {
	var wg sync.WaitGroup
	for _, v := range f.pending {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok := f.l.consume(v)
			f.mu.Lock()
			f.answers = append(f.answers, ok)
			f.mu.Unlock()
		}()
	}
	wg.Wait()
	return f.err
}

func TestPushDrain(t *testing.T) {
	t.Run("HandlesWhatWasReceived", func(t *testing.T) {
		c := newConsumer(t, newStore())
		l := newLedger()
		pl := newListener[*fakeView](c, l.handle)
		pc := &fakeStopper{l: pl, pending: []*fakeView{newView("m1", "k1"), newView("m2", "k2")}}
		if err := pl.drain(context.Background(), pc); err != nil {
			t.Errorf("drain: %v", err)
		}
		if len(pc.answers) != 2 || !pc.answers[0] || !pc.answers[1] || l.count("k1") != 1 || l.count("k2") != 1 {
			t.Errorf("answers %v, applied k1 %d k2 %d; want both SUCCESS and applied", pc.answers, l.count("k1"), l.count("k2"))
		}
		if err := pl.drain(context.Background(), pc); !errors.Is(err, errDrained) {
			t.Errorf("second drain: %v, want errDrained", err)
		}
	})
	t.Run("TimesOut", func(t *testing.T) {
		c := newConsumer(t, newStore())
		l := newLedger()
		l.block = make(chan struct{}) // never closed
		pl := newListener[*fakeView](c, l.handle)
		stopErr := errors.New("stop failed")
		pc := &fakeStopper{l: pl, pending: []*fakeView{newView("m1", "k1")}, err: stopErr}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		err := pl.drain(ctx, pc)
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, stopErr) {
			t.Errorf("drain: %v; want the deadline and the stop's error", err)
		}
		if len(pc.answers) != 1 || pc.answers[0] || c.Stats().Failed != 1 {
			t.Errorf("answers %v, failed %d; want FAILURE for the cancelled handler", pc.answers, c.Stats().Failed)
		}
		// Afterwards nothing runs: the Consumer holds what comes.
		if pl.consume(newView("m2", "k2")) || l.count("k2") != 0 || c.Stats().Canceled != 1 {
			t.Errorf("a message after the drain ran (applied %d, canceled %d)", l.count("k2"), c.Stats().Canceled)
		}
	})
}
