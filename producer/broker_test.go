package producer_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	rmqconsumer "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	rmqproducer "github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/producer"
)

func startProducer(t *testing.T, ns, name string) *producer.Producer {
	t.Helper()
	rp, err := rocketmq.NewProducer(
		rmqproducer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns})),
		rmqproducer.WithGroupName(name),
		rmqproducer.WithInstanceName(name),
		rmqproducer.WithRetry(1),
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := rp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rp.Shutdown() })
	gen, err := idgen.New(5, idgen.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := producer.New(rp, producer.IDKeys(gen))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestResendKeepsKeyOnTheWire sends one message twice through a real broker
// and checks what a consumer receives: both copies carry the same key in the
// property and in Keys.
func TestResendKeepsKeyOnTheWire(t *testing.T) {
	ns := testenv.RocketMQ(t)
	run := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	topic := "producer-" + run
	testenv.RocketMQTopic(t, topic, 1)

	var mu sync.Mutex
	var got []*primitive.MessageExt
	c, err := rocketmq.NewPushConsumer(
		rmqconsumer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns})),
		rmqconsumer.WithGroupName("producer-test-"+run),
		rmqconsumer.WithInstance("producer-test-"+run),
		rmqconsumer.WithConsumeFromWhere(rmqconsumer.ConsumeFromFirstOffset),
	)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Subscribe(topic, rmqconsumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (rmqconsumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, msgs...)
		return rmqconsumer.ConsumeSuccess, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Shutdown() })

	p := startProducer(t, ns, "producer-"+run)
	m := primitive.NewMessage(topic, []byte("pay order 42"))
	for range 2 {
		if _, err := p.SendSync(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	key := msgkey.Of(m)

	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("received %d of 2 copies", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, r := range got {
		if k := r.GetProperty(msgkey.Property); k != key {
			t.Errorf("received key %q, want %q", k, key)
		}
		if !strings.Contains(" "+r.GetKeys()+" ", " "+key+" ") {
			t.Errorf("Keys %q lack %q", r.GetKeys(), key)
		}
	}
}

// TestSendToRefusingBroker sends through a name server nobody listens on:
// the error is returned, and the key stays for the caller's retry.
func TestSendToRefusingBroker(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()

	p := startProducer(t, dead, fmt.Sprintf("refused-%d", time.Now().UnixNano()))
	m := primitive.NewMessage("nowhere", []byte("x"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = p.SendSync(ctx, m)
	if err == nil {
		t.Fatal("send through a dead name server succeeded")
	}
	key := msgkey.Of(m)
	if key == "" {
		t.Fatal("the failed send left the message without a key")
	}
	_, err = p.SendSync(ctx, m)
	if err == nil || errors.Is(err, msgkey.ErrInvalid) {
		t.Fatalf("second send: %v", err)
	}
	if msgkey.Of(m) != key {
		t.Fatalf("the retry changed the key from %s to %s", key, msgkey.Of(m))
	}
}

// TestAsyncAndOneWayStampTheKey sends one message twice with SendAsync and
// another twice with SendOneWay through a real broker: every copy a
// consumer receives carries its message's key, in the property and in Keys.
func TestAsyncAndOneWayStampTheKey(t *testing.T) {
	ns := testenv.RocketMQ(t)
	run := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	topic := "producer-ways-" + run
	testenv.RocketMQTopic(t, topic, 1)

	var mu sync.Mutex
	got := map[string][]*primitive.MessageExt{} // by body
	c, err := rocketmq.NewPushConsumer(
		rmqconsumer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns})),
		rmqconsumer.WithGroupName("producer-ways-"+run),
		rmqconsumer.WithInstance("producer-ways-"+run),
		rmqconsumer.WithConsumeFromWhere(rmqconsumer.ConsumeFromFirstOffset),
	)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Subscribe(topic, rmqconsumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (rmqconsumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			got[string(m.Body)] = append(got[string(m.Body)], m)
		}
		return rmqconsumer.ConsumeSuccess, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Shutdown() })

	p := startProducer(t, ns, "producer-ways-"+run)
	ctx := context.Background()
	async := primitive.NewMessage(topic, []byte("async"))
	for range 2 {
		done := make(chan error, 1)
		if err := p.SendAsync(ctx, func(_ context.Context, _ *primitive.SendResult, err error) { done <- err }, async); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	oneWay := primitive.NewMessage(topic, []byte("one-way"))
	for range 2 {
		if err := p.SendOneWay(ctx, oneWay); err != nil {
			t.Fatal(err)
		}
	}

	want := map[string]string{"async": msgkey.Of(async), "one-way": msgkey.Of(oneWay)}
	if want["async"] == "" || want["one-way"] == "" || want["async"] == want["one-way"] {
		t.Fatalf("keys %v: want two distinct stamped keys", want)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(got["async"]) + len(got["one-way"])
		mu.Unlock()
		if n >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("received %d of 4 copies", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for body, key := range want {
		for _, r := range got[body] {
			if k := msgkey.Of(r); k != key {
				t.Errorf("%s copy carries key %q, want %q", body, k, key)
			}
			if !strings.Contains(" "+r.GetKeys()+" ", " "+key+" ") {
				t.Errorf("%s copy's Keys %q lack %q", body, r.GetKeys(), key)
			}
		}
	}
}
