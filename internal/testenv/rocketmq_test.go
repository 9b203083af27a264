package testenv_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testenv"
)

func TestStartRocketMQ(t *testing.T) {
	// The round trip starts and shuts down a remoting client, which races
	// inside itself (see racechild): run where only our races fail it.
	if !racechild.Test(t) {
		return
	}
	// The client logs every rebalance at info level to standard output.
	// Unlike rlog.SetLogger, this does not race with running clients.
	rlog.SetLogLevel("error")
	ctx := t.Context()
	begin := time.Now()
	srv, err := testenv.StartRocketMQ(ctx, t.TempDir(), t.Output())
	if errors.Is(err, exec.ErrNotFound) {
		testenv.Missing(t, err.Error()) // a failure under CI=true
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	})
	t.Logf(racechild.Figure+"RocketMQ %s started in %v: name server %s, broker %s",
		srv.Version(), time.Since(begin).Round(time.Millisecond), srv.NameServer(), srv.BrokerAddr())
	// Misuse of the one broker is refused, and leaves it serving.
	if err := srv.KillBroker(1); err == nil {
		t.Error("KillBroker(1) of a one-broker server succeeded")
	}
	if err := srv.RestartBroker(ctx, 0); err == nil {
		t.Error("RestartBroker(0) of a running broker succeeded")
	}

	rocketmqRoundTrip(t, srv.NameServer(), srv.CreateTopic)
}

// TestStartRocketMQClusterValidates checks that a broker count out of
// range is refused before anything starts.
func TestStartRocketMQClusterValidates(t *testing.T) {
	for _, n := range []int{-1, 9} {
		if srv, err := testenv.StartRocketMQCluster(t.Context(), t.TempDir(), nil, testenv.RocketMQConfig{Brokers: n}); err == nil {
			srv.Stop()
			t.Errorf("StartRocketMQCluster started %d brokers", n)
		}
	}
}

// rocketmqRoundTrip creates a topic with createTopic, sends one message
// through the name server at nameServer with rocketmq-client-go and waits
// for a push consumer to receive it; the consumer's group has the message
// as its backlog (testenv.RocketMQBacklog) until it commits its offset.
func rocketmqRoundTrip(t *testing.T, nameServer string, createTopic func(context.Context, string, int) error) {
	t.Helper()
	ctx := t.Context()
	// Names unique per run: clients are shared per process by instance name,
	// and a consumer group's offsets outlive its consumers.
	id := fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())
	topic := "topic-" + id
	begin := time.Now()
	if err := createTopic(ctx, topic, 2); err != nil {
		t.Fatal(err)
	}
	t.Logf(racechild.Figure+"topic created and routed in %v", time.Since(begin).Round(time.Millisecond))

	ns := primitive.NewPassthroughResolver([]string{nameServer})
	p, err := rocketmq.NewProducer(
		producer.WithNsResolver(ns),
		producer.WithGroupName("producer-"+id),
		producer.WithInstanceName("producer-"+id),
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown()

	body := "hello " + id
	res, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != primitive.SendOK {
		t.Fatalf("send status %v, want SendOK", res.Status)
	}
	group := "consumer-" + id
	if n, err := testenv.RocketMQBacklog(ctx, nameServer, group, topic); err != nil || n != 1 {
		t.Fatalf("backlog of a group that consumed nothing: %d, %v; want the message sent", n, err)
	}

	received := make(chan *primitive.MessageExt, 1)
	c, err := rocketmq.NewPushConsumer(
		consumer.WithNsResolver(ns),
		consumer.WithGroupName(group),
		consumer.WithInstance("consumer-"+id),
		// With the default, ConsumeFromLastOffset, a new group starts at
		// the end of a queue unless the broker still holds the queue's
		// first message in memory: say what a test means.
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			select {
			case received <- m:
			default:
			}
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	begin = time.Now()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown()

	select {
	case m := <-received:
		if string(m.Body) != body {
			t.Fatalf("received %q, want %q", m.Body, body)
		}
		t.Logf(racechild.Figure+"first message received %v after consumer Start", time.Since(begin).Round(time.Millisecond))
	case <-time.After(60 * time.Second):
		t.Fatal("no message received within 60s")
	}
	// The client commits its offsets every 5 s.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		n, err := testenv.RocketMQBacklog(ctx, nameServer, group, topic)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("backlog %d 30s after the message was received, want 0", n)
		}
	}
}
