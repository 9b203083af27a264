package remoting_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/internal/adaptertest"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/remoting"
)

// TestConformance runs the adapters' conformance suite
// (internal/adaptertest) against Concurrently on a 4.x and a 5.x broker,
// through the remoting client, and against Orderly on a 4.x one, each in
// a child process (see inChild).
func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name    string
		b       broker
		orderly bool
	}{
		{"Concurrently/4.x", broker4, false},
		{"Concurrently/5.x", broker5, false},
		{"Orderly/4.x", broker4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if !inChild(t, tc.b) {
				return
			}
			adaptertest.Run(t, adaptertest.Harness{Ordered: tc.orderly, New: func(t *testing.T) adaptertest.Env {
				return conformanceEnv(t, tc.b, tc.orderly)
			}})
		})
	}
}

// conformanceEnv is a fresh topic on b (one queue for an orderly
// consumer, whose order is the queue's), its retry topic, and a producer.
func conformanceEnv(t *testing.T, b broker, orderly bool) adaptertest.Env {
	ns := b.nameServer(t)
	run := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	topic, group := "conf-"+run, "conf-group-"+run
	queues := 4
	if orderly {
		queues = 1
	}
	b.topic(t, topic, queues)
	// The client looks up the retry topic's route at start and then only
	// every 30s; creating it now lets failed messages come back at once.
	b.topic(t, "%RETRY%"+group, 1)
	p, err := rocketmq.NewProducer(producerOptions(ns, "conf-producer-"+run)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Shutdown() })
	var batched atomic.Int64
	instance := atomic.Int32{}
	return adaptertest.Env{
		Group: group,
		Send: func(t *testing.T, keys ...string) {
			for _, k := range keys {
				m := primitive.NewMessage(topic, []byte("order "+k))
				m.WithProperty(msgkey.Property, k)
				m.WithKeys([]string{k})
				if _, err := p.SendSync(t.Context(), m); err != nil {
					t.Fatalf("send %s: %v", k, err)
				}
			}
		},
		Start: func(t *testing.T, c *consumer.Consumer, h consumer.Handler, batch bool) func(context.Context) error {
			opts := []rmq.Option{
				rmq.WithNsResolver(primitive.NewPassthroughResolver([]string{ns})),
				rmq.WithGroupName(group),
				rmq.WithInstance(fmt.Sprintf("conf-%s-%d", run, instance.Add(1))),
				rmq.WithConsumeFromWhere(rmq.ConsumeFromFirstOffset),
			}
			if batch {
				opts = append(opts, rmq.WithConsumeMessageBatchMaxSize(16))
			}
			cb := remoting.Concurrently(c, h)
			if orderly {
				opts = append(opts, rmq.WithConsumerOrder(true))
				cb = remoting.Orderly(c, h, remoting.WithSuspend(200*time.Millisecond))
			}
			pc, err := rocketmq.NewPushConsumer(opts...)
			if err != nil {
				t.Fatal(err)
			}
			err = pc.Subscribe(topic, rmq.MessageSelector{}, func(ctx context.Context, ms ...*primitive.MessageExt) (rmq.ConsumeResult, error) {
				if len(ms) > 1 {
					batched.Add(int64(len(ms)))
				}
				// A retry after 1s rather than the broker's default 10s.
				if cc, ok := primitive.GetConcurrentlyCtx(ctx); ok {
					cc.DelayLevelWhenNextConsume = 1
				}
				return cb(ctx, ms...)
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := pc.Start(); err != nil {
				t.Fatal(err)
			}
			return func(ctx context.Context) error { return remoting.Drain(ctx, c, pc) }
		},
		Batched: batched.Load,
	}
}
