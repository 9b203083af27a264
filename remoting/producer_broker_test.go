package remoting_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	rmqproducer "github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testenv/remotingread"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/remoting"
)

// producerOptions are the options of a test producer of group name, and
// named name, on the name server at ns, then opts.
func producerOptions(ns, name string, opts ...rmqproducer.Option) []rmqproducer.Option {
	return append([]rmqproducer.Option{
		rmqproducer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns})),
		rmqproducer.WithGroupName(name),
		rmqproducer.WithInstanceName(name),
	}, opts...)
}

func startProducer(t *testing.T, ns, name string, opts ...rmqproducer.Option) *remoting.Producer {
	t.Helper()
	rp, err := rocketmq.NewProducer(producerOptions(ns, name, append([]rmqproducer.Option{rmqproducer.WithRetry(1)}, opts...)...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := rp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rp.Shutdown() })
	p, err := remoting.NewProducer(rp, testkit.Keys(t, 5))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// brokers are the real brokers the tests send through with the remoting
// client: 4.9.7, or a 5.x broker reached through its name server (not the
// proxy).
var brokers = []broker{broker4, broker5}

// forEachBroker runs test as a subtest per broker, in a child process: the
// clients a test starts and shuts down race with themselves, which the
// child tolerates and nothing else (internal/racechild); a test logs
// racechild.Figure lines only.
func forEachBroker(t *testing.T, test func(t *testing.T, ns string)) {
	for _, b := range brokers {
		t.Run(b.name, func(t *testing.T) {
			if !racechild.Test(t, b.env(t)...) {
				return
			}
			test(t, b.nameServer(t))
		})
	}
}

// TestResendKeepsKeyOnTheWire sends one message twice through a real broker
// and checks what a consumer receives: both copies carry the same key in the
// property and in Keys.
func TestResendKeepsKeyOnTheWire(t *testing.T) { forEachBroker(t, testResendKeepsKeyOnTheWire) }

func testResendKeepsKeyOnTheWire(t *testing.T, ns string) {
	run := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	topic := "producer-" + run
	got := remotingread.Topic(t, ns, topic, 1)

	p := startProducer(t, ns, "producer-"+run)
	m := primitive.NewMessage(topic, []byte("pay order 42"))
	for range 2 {
		if _, err := p.SendSync(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	msgs := got.Await(t, "two copies", func(ms []*primitive.MessageExt) bool { return len(ms) >= 2 })
	checkKey(t, msgs, "pay order 42", msgkey.Of(m))
}

// TestSendToRefusingBroker sends through a name server nobody listens on:
// the error is returned, and the key stays for the caller's retry. (In a
// child process, as forEachBroker's tests.)
func TestSendToRefusingBroker(t *testing.T) {
	if !racechild.Test(t) {
		return
	}
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
func TestAsyncAndOneWayStampTheKey(t *testing.T) { forEachBroker(t, testAsyncAndOneWayStampTheKey) }

func testAsyncAndOneWayStampTheKey(t *testing.T, ns string) {
	run := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	topic := "producer-ways-" + run
	got := remotingread.Topic(t, ns, topic, 1)

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
	if msgkey.Of(async) == "" || msgkey.Of(oneWay) == "" || msgkey.Of(async) == msgkey.Of(oneWay) {
		t.Fatalf("keys %q and %q: want two distinct stamped keys", msgkey.Of(async), msgkey.Of(oneWay))
	}
	msgs := got.Await(t, "two copies of each", func(ms []*primitive.MessageExt) bool {
		n := bodies(ms)
		return n["async"] >= 2 && n["one-way"] >= 2
	})
	checkKey(t, msgs, "async", msgkey.Of(async))
	checkKey(t, msgs, "one-way", msgkey.Of(oneWay))
}

// TestBatchGoesToItsShardingKeysQueue sends batches of messages sharing a
// sharding key through a producer that picks queues by it, to a topic of
// four queues: every message lands in the queue of its key, alone or in a
// batch, in the order sent, each with its own key (a message that carried
// one keeps it).
func TestBatchGoesToItsShardingKeysQueue(t *testing.T) {
	forEachBroker(t, testBatchGoesToItsShardingKeysQueue)
}

func testBatchGoesToItsShardingKeysQueue(t *testing.T, ns string) {
	run := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	topic := "producer-batch-" + run
	got := remotingread.Topic(t, ns, topic, 4)

	p := startProducer(t, ns, "producer-batch-"+run, rmqproducer.WithQueueSelector(rmqproducer.NewHashQueueSelector()))
	const keys, rounds, size = 3, 3, 4
	var sent []*primitive.Message
	for r := range rounds {
		for k := range keys {
			batch := make([]*primitive.Message, size)
			for i := range batch {
				batch[i] = primitive.NewMessage(topic, fmt.Appendf(nil, "k%d/%d", k, r*size+i))
				batch[i].WithShardingKey(fmt.Sprint("k", k))
			}
			if r == 0 && k == 0 {
				batch[1].WithProperty(msgkey.Property, "order-42")
			}
			if _, err := p.SendSync(context.Background(), batch...); err != nil {
				t.Fatal(err)
			}
			sent = append(sent, batch...)
		}
		m := primitive.NewMessage(topic, fmt.Appendf(nil, "k0/alone%d", r))
		m.WithShardingKey("k0")
		if _, err := p.SendSync(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, m)
	}
	if k := msgkey.Of(sent[1]); k != "order-42" {
		t.Fatalf("the message carrying key order-42 was sent with %q", k)
	}
	msgs := got.Await(t, "every message", func(ms []*primitive.MessageExt) bool { return len(ms) >= len(sent) })
	for _, m := range sent {
		checkKey(t, msgs, string(m.Body), msgkey.Of(m))
	}
	slices.SortFunc(msgs, func(a, b *primitive.MessageExt) int { return int(a.QueueOffset - b.QueueOffset) })
	queue, order := map[string]int{}, map[string][]string{}
	for _, m := range msgs {
		k, _, _ := strings.Cut(string(m.Body), "/")
		if q, ok := queue[k]; ok && q != m.Queue.QueueId {
			t.Fatalf("%s in queues %d and %d", k, q, m.Queue.QueueId)
		}
		queue[k] = m.Queue.QueueId
		order[k] = append(order[k], string(m.Body))
	}
	for _, m := range sent {
		k, _, _ := strings.Cut(string(m.Body), "/")
		if len(order[k]) == 0 || order[k][0] != string(m.Body) {
			t.Fatalf("%s arrived out of order: %v", m.Body, order[k])
		}
		order[k] = order[k][1:]
	}
}

// bodies counts msgs by body.
func bodies(msgs []*primitive.MessageExt) map[string]int {
	n := map[string]int{}
	for _, m := range msgs {
		n[string(m.Body)]++
	}
	return n
}

// checkKey fails t unless every copy of body in msgs carries key, in the
// property and among its Keys.
func checkKey(t *testing.T, msgs []*primitive.MessageExt, body, key string) {
	t.Helper()
	for _, r := range msgs {
		if string(r.Body) != body {
			continue
		}
		if k := msgkey.Of(r); k != key {
			t.Errorf("%s: received key %q, want %q", body, k, key)
		}
		if !strings.Contains(" "+r.GetKeys()+" ", " "+key+" ") {
			t.Errorf("%s: Keys %q lack %q", body, r.GetKeys(), key)
		}
	}
}
