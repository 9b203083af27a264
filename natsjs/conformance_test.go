package natsjs_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/adaptertest"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/natsjs"
)

// maxReconsume is the conformance consumers' retry policy: a failure is
// redelivered after 1s, up to 16 times, which the JetStream consumers'
// MaxDeliver (17) allows.
const maxReconsume = 16

// TestConformance runs the adapters' conformance suite
// (internal/adaptertest) against Pull on a plain durable consumer, and
// against Pull on a consumer with MaxAckPending 1, which keeps the
// stream's order, a failed message included.
func TestConformance(t *testing.T) {
	t.Parallel()
	url := testenv.NATS(t)
	for _, tc := range []struct {
		name    string
		ordered bool
	}{{"Pull", false}, {"Pull/Ordered", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			adaptertest.Run(t, adaptertest.Harness{
				Ordered: tc.ordered,
				Options: []consumer.Option{consumer.WithDelayLevels(time.Second), consumer.WithMaxReconsumeTimes(maxReconsume),
					consumer.WithGuard(dedupe.GuardConfig{Retention: 10 * time.Minute})},
				New: func(t *testing.T) adaptertest.Env { return conformanceEnv(t, url, tc.ordered) },
			})
		})
	}
}

// conformanceEnv is a fresh stream and durable consumer, whose AckWait
// (2s) the waits outlast, and consumers through Pull.
func conformanceEnv(t *testing.T, url string, ordered bool) adaptertest.Env {
	cfg := jetstream.ConsumerConfig{AckWait: 2 * time.Second, MaxDeliver: maxReconsume + 1}
	if ordered {
		cfg.MaxAckPending = 1
	}
	f := newFixture(t, url, cfg)
	var batched atomic.Int64
	return adaptertest.Env{
		Group: f.durable,
		Send:  func(t *testing.T, keys ...string) { f.send(t, keys...) },
		Start: func(t *testing.T, c *consumer.Consumer, h consumer.Handler, batch bool) func(context.Context) error {
			pc := natsjs.PullConfig{PollWait: 500 * time.Millisecond}
			if batch {
				pc.BatchSize = 16
			}
			if ordered {
				pc.Workers = 1
			}
			r, err := natsjs.Pull(c, fetches{Consumer: f.consumer(t), n: &batched}, h, pc)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- r.Run(context.Background()) }()
			return func(context.Context) error {
				err := r.Close()
				<-done
				return err
			}
		},
		Batched: batched.Load,
	}
}

// fetches is a jetstream.Consumer that counts the messages its fetches
// delivered in batches of more than one.
type fetches struct {
	jetstream.Consumer
	n *atomic.Int64
}

func (f fetches) Fetch(n int, opts ...jetstream.FetchOpt) (jetstream.MessageBatch, error) {
	b, err := f.Consumer.Fetch(n, opts...)
	if err != nil {
		return nil, err
	}
	ch := make(chan jetstream.Msg, n)
	go func() {
		defer close(ch)
		var ms []jetstream.Msg
		for m := range b.Messages() {
			ms = append(ms, m)
			ch <- m
		}
		if len(ms) > 1 {
			f.n.Add(int64(len(ms)))
		}
	}()
	return batch{ch, b}, nil
}

type batch struct {
	ch <-chan jetstream.Msg
	jetstream.MessageBatch
}

func (b batch) Messages() <-chan jetstream.Msg { return b.ch }
