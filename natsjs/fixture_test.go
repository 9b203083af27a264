package natsjs_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemq/idemq/msgkey"
)

// fixture is a fresh stream (one subject of its own) and durable pull
// consumer on a real nats-server.
type fixture struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	stream  string
	subject string
	durable string
}

var fixtures atomic.Int64

// newFixture connects to url and makes a stream and a durable consumer of
// it with cfg (its Durable and AckPolicy filled in), named after the test.
func newFixture(t testing.TB, url string, cfg jetstream.ConsumerConfig) *fixture {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("%s_%d_%d", strings.NewReplacer("/", "_", ".", "_", " ", "_").Replace(t.Name()), time.Now().UnixNano(), fixtures.Add(1))
	f := &fixture{nc: nc, js: js, stream: name, subject: "idemq." + name, durable: "c_" + name}
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: f.stream, Subjects: []string{f.subject}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(t.Context(), f.stream) })
	cfg.Durable, cfg.AckPolicy = f.durable, jetstream.AckExplicitPolicy
	if _, err := js.CreateConsumer(t.Context(), f.stream, cfg); err != nil {
		t.Fatal(err)
	}
	return f
}

// consumer returns the durable consumer, looked up anew (its info as now).
func (f *fixture) consumer(t testing.TB) jetstream.Consumer {
	t.Helper()
	jc, err := f.js.Consumer(t.Context(), f.stream, f.durable)
	if err != nil {
		t.Fatal(err)
	}
	return jc
}

// send publishes a message for each key, in order, with the key in its
// msgkey.Property header only: a copy of a key reaches the consumer, as
// one published again after the stream's duplicate window (or one that
// the server redelivers) does. (The Producer also sets the key as the
// message id, which would have the server drop a copy within the
// window: see TestProducer.)
func (f *fixture) send(t testing.TB, keys ...string) {
	t.Helper()
	for _, k := range keys {
		m := nats.NewMsg(f.subject)
		m.Data = []byte("order " + k)
		m.Header.Set(msgkey.Property, k)
		if _, err := f.js.PublishMsg(t.Context(), m); err != nil {
			t.Fatalf("publish %s: %v", k, err)
		}
	}
}
