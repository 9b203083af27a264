package natsjs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/natsjs"
)

func newConsumer(t *testing.T, group string, opts ...consumer.Option) *consumer.Consumer {
	t.Helper()
	c, err := consumer.New(memdedupe.New(memdedupe.Config{}), group, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// run runs r until the test ends, and returns what closes it.
func run(t *testing.T, r *natsjs.Receiver) (closeIt func() error) {
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background()) }()
	var once sync.Once
	var err error
	closeIt = func() error {
		once.Do(func() {
			err = r.Close()
			<-done
		})
		return err
	}
	t.Cleanup(func() { _ = closeIt() })
	return closeIt
}

// TestPullRefuses checks what Pull refuses: settings that cannot work,
// and a consumer that does not acknowledge each message on its own.
func TestPullRefuses(t *testing.T) {
	t.Parallel()
	url := testenv.NATS(t)
	f := newFixture(t, url, jetstream.ConsumerConfig{})
	c := newConsumer(t, f.durable)
	h := func(context.Context, *consumer.Message) error { return nil }
	for _, tc := range []struct {
		name string
		cfg  natsjs.PullConfig
		ack  jetstream.AckPolicy
		want string
	}{
		{"negative workers", natsjs.PullConfig{Workers: -1}, jetstream.AckExplicitPolicy, "workers"},
		{"negative batch", natsjs.PullConfig{BatchSize: -1}, jetstream.AckExplicitPolicy, "batch size"},
		{"poll wait under 1ms", natsjs.PullConfig{PollWait: time.Microsecond}, jetstream.AckExplicitPolicy, "poll wait"},
		{"negative drain timeout", natsjs.PullConfig{DrainTimeout: -time.Second}, jetstream.AckExplicitPolicy, "drain timeout"},
		{"ack all", natsjs.PullConfig{}, jetstream.AckAllPolicy, "want explicit"},
		{"ack none", natsjs.PullConfig{}, jetstream.AckNonePolicy, "want explicit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jc, err := f.js.CreateOrUpdateConsumer(t.Context(), f.stream, jetstream.ConsumerConfig{
				Name: "refuse_" + strings.ReplaceAll(tc.name, " ", "_"), AckPolicy: tc.ack})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := natsjs.Pull(c, jc, h, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Pull: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// TestPullMessage checks what a handler reads of a message published
// without the Producer, keyed by its message id through the MsgID
// fallback, and failed once: its subject, headers, id and reconsume
// times.
func TestPullMessage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testenv.NATS(t), jetstream.ConsumerConfig{MaxDeliver: 3})
	c := newConsumer(t, f.durable, consumer.WithKeyFallback(natsjs.MsgID), consumer.WithDelayLevels(100*time.Millisecond),
		consumer.WithMaxReconsumeTimes(2))
	var mu sync.Mutex
	var seen []consumer.Message
	r, err := natsjs.Pull(c, f.consumer(t), func(_ context.Context, m *consumer.Message) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, *m)
		if len(seen) == 1 {
			return errors.New("first run fails")
		}
		return nil
	}, natsjs.PullConfig{PollWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	run(t, r)
	msg := nats.NewMsg(f.subject)
	msg.Data = []byte("body")
	msg.Header.Set(jetstream.MsgIDHeader, "order-7")
	msg.Header.Set("tenant", "acme")
	if _, err := f.js.PublishMsg(t.Context(), msg); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the retry to run", func() bool { return c.Stats().Completed == 1 })
	mu.Lock()
	defer mu.Unlock()
	for i, m := range seen {
		if m.Topic != f.subject || string(m.Body) != "body" || m.Properties["tenant"] != "acme" || m.Reconsumed != int32(i) ||
			m.ID != f.stream+":1" || natsjs.MsgID(&m) != "order-7" || msgkey.Of(&m) != "" {
			t.Errorf("run %d read topic %q, body %q, properties %v, reconsumed %d, id %q", i, m.Topic, m.Body, m.Properties, m.Reconsumed, m.ID)
		}
		if _, ok := m.Raw.(jetstream.Msg); !ok {
			t.Errorf("run %d: Raw is %T, want a jetstream.Msg", i, m.Raw)
		}
	}
	if len(seen) != 2 {
		t.Errorf("ran %d times, want 2", len(seen))
	}
}

// TestDrainTimeout closes a Receiver whose handler outlasts the drain: Run
// returns, saying so, with the handler's context cancelled; the message
// goes back and another Receiver applies it.
func TestDrainTimeout(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testenv.NATS(t), jetstream.ConsumerConfig{AckWait: 2 * time.Second, MaxDeliver: 5})
	var mu sync.Mutex
	applied := 0
	running := make(chan struct{})
	first := newConsumer(t, f.durable, consumer.WithMaxReconsumeTimes(4), consumer.WithDelayLevels(100*time.Millisecond))
	r, err := natsjs.Pull(first, f.consumer(t), func(ctx context.Context, m *consumer.Message) error {
		close(running)
		<-ctx.Done() // stuck until the drain gives up
		return context.Cause(ctx)
	}, natsjs.PullConfig{PollWait: 200 * time.Millisecond, DrainTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	closeFirst := run(t, r)
	f.send(t, "stuck-1")
	<-running
	if err := closeFirst(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close: %v, want the drain's timeout", err)
	}
	second := newConsumer(t, f.durable, consumer.WithMaxReconsumeTimes(4), consumer.WithDelayLevels(100*time.Millisecond))
	r2, err := natsjs.Pull(second, f.consumer(t), func(context.Context, *consumer.Message) error {
		mu.Lock()
		defer mu.Unlock()
		applied++
		return nil
	}, natsjs.PullConfig{PollWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	run(t, r2)
	testkit.WaitFor(t, "the message applied by the second receiver", func() bool { return second.Stats().Completed == 1 })
	mu.Lock()
	defer mu.Unlock()
	if applied != 1 {
		t.Errorf("applied %d times, want 1", applied)
	}
}

// TestReceiverLeavesNoGoroutine runs a Receiver through messages and
// closes it, then the connection: nothing it started runs on. (Not
// parallel: the other tests' goroutines would count.)
func TestReceiverLeavesNoGoroutine(t *testing.T) {
	url := testenv.NATS(t)
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) }) // after the fixture's cleanups
	f := newFixture(t, url, jetstream.ConsumerConfig{AckWait: 2 * time.Second})
	c := newConsumer(t, f.durable)
	r, err := natsjs.Pull(c, f.consumer(t), func(context.Context, *consumer.Message) error { return nil },
		natsjs.PullConfig{PollWait: 100 * time.Millisecond, BatchSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	closeIt := run(t, r)
	f.send(t, "leak-1", "leak-2", "leak-3")
	testkit.WaitFor(t, "the messages applied", func() bool { return c.Stats().Completed == 3 })
	if err := closeIt(); err != nil {
		t.Fatal(err)
	}
}

// TestPullWithinMaxRequestBatch runs a Receiver, whose room is larger
// than its consumer's MaxRequestBatch, through more messages than that:
// its pulls ask for no more than the server accepts.
func TestPullWithinMaxRequestBatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testenv.NATS(t), jetstream.ConsumerConfig{AckWait: 2 * time.Second, MaxRequestBatch: 3})
	c := newConsumer(t, f.durable)
	r, err := natsjs.Pull(c, f.consumer(t), func(context.Context, *consumer.Message) error { return nil },
		natsjs.PullConfig{Workers: 4, PollWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	run(t, r)
	keys := make([]string, 10)
	for i := range keys {
		keys[i] = fmt.Sprintf("batch-%d", i)
	}
	f.send(t, keys...)
	testkit.WaitFor(t, "the messages applied", func() bool { return c.Stats().Completed == int64(len(keys)) })
}
