package grpcv5_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-clients/golang/v5"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/grpcv5"
	"github.com/idemq/idemq/internal/adaptertest"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/msgkey"
)

// TestConformance runs the adapters' conformance suite
// (internal/adaptertest) against Simple and Push on a plain group, and
// against Push on a FIFO one, whose message group's order it keeps as long
// as no message fails (see adaptertest.Harness.RetryBreaksOrder). (In a
// child process: see inChild.)
func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name       string
		push, fifo bool
	}{{"Simple", false, false}, {"Push", true, false}, {"Push/FIFO", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			if !inChild(t) {
				return
			}
			adaptertest.Run(t, adaptertest.Harness{
				Ordered: tc.fifo, RetryBreaksOrder: tc.fifo,
				// The groups retry after 1s, up to 16 times.
				Options: []consumer.Option{consumer.WithDelayLevels(oneSecond...), consumer.WithMaxReconsumeTimes(16),
					consumer.WithGuard(dedupe.GuardConfig{Retention: 10 * time.Minute})},
				New: func(t *testing.T) adaptertest.Env { return conformanceEnv(t, tc.push, tc.fifo) },
			})
		})
	}
}

// conformanceEnv is a fresh topic and group (a FIFO one if fifo, to whose
// one message group every message is sent), a producer, and consumers
// through Push if push, else through Simple.
func conformanceEnv(t *testing.T, push, fifo bool) adaptertest.Env {
	f := newFixture(t, "conf", 16)
	if fifo {
		f.group += "-fifo"
		if err := testenv.CreateRocketMQOrderlyGroup(t.Context(), f.ep.NameServer, f.group, 16); err != nil {
			t.Fatal(err)
		}
	}
	p := f.producer()
	var batched atomic.Int64
	env := adaptertest.Env{
		Group: f.group,
		Send: func(t *testing.T, keys ...string) {
			for _, k := range keys {
				m := &golang.Message{Topic: f.topic, Body: []byte("order " + k)}
				m.AddProperty(msgkey.Property, k)
				m.SetKeys(k)
				if fifo {
					m.SetMessageGroup("conf")
				}
				if _, err := p.Send(t.Context(), m); err != nil {
					t.Fatalf("send %s: %v", k, err)
				}
			}
		},
		Start: func(t *testing.T, c *consumer.Consumer, h consumer.Handler, batch bool) func(context.Context) error {
			if !push {
				cfg := grpcv5.SimpleConfig{InvisibleDuration: 10 * time.Second, BatchSize: 1}
				if batch {
					cfg.BatchSize = 16
				}
				r, err := grpcv5.Simple(c, &batches{SimpleConsumer: f.simpleConsumer(), n: &batched}, h, cfg)
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
			}
			l, err := grpcv5.Push(c, h)
			if err != nil {
				t.Fatal(err)
			}
			pc, err := golang.NewPushConsumer(f.config(f.group),
				golang.WithPushMessageListener(l),
				golang.WithPushSubscriptionExpressions(map[string]*golang.FilterExpression{f.topic: golang.SUB_ALL}))
			if err != nil {
				t.Fatal(err)
			}
			if err := pc.Start(); err != nil {
				t.Fatal(err)
			}
			return func(ctx context.Context) error { return l.Drain(ctx, pc) }
		},
	}
	if !push { // a push consumer hands its listener one message at a time
		env.Batched = batched.Load
	}
	return env
}

// batches is a SimpleConsumer that counts the messages it received in
// batches of more than one.
type batches struct {
	golang.SimpleConsumer
	n *atomic.Int64
}

func (b *batches) Receive(ctx context.Context, n int32, d time.Duration) ([]*golang.MessageView, error) {
	vs, err := b.SimpleConsumer.Receive(ctx, n, d)
	if len(vs) > 1 {
		b.n.Add(int64(len(vs)))
	}
	return vs, err
}
