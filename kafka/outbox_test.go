package kafka_test

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/kafka"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/outbox"
)

// TestOutboxSender sends rows as the relay hands them over: a row alone, a
// batch of one ordering key, and rows too large, which are refused for
// good (outbox.ErrRefused) alone and in a batch; the records carry the
// rows' keys and properties as headers, and their ordering key as Key.
func TestOutboxSender(t *testing.T) {
	t.Parallel()
	brokers := []string{testenv.Kafka(t)}
	topic := unique("outbox")
	createTopic(t, brokers, topic, 4)
	s, err := kafka.NewOutboxSender(client(t, brokers))
	if err != nil {
		t.Fatal(err)
	}
	row := func(key, orderingKey string, size int) *outbox.Message {
		body := make([]byte, size)
		return &outbox.Message{Topic: topic, Body: body, OrderingKey: orderingKey,
			Properties: map[string]string{msgkey.Property: key, "origin": "test"}}
	}
	if err := s.Send(t.Context(), row("k1", "", 10)); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if err := s.SendBatch(t.Context(), []*outbox.Message{row("k2", "customer-7", 10), row("k3", "customer-7", 10)}); err != nil {
		t.Fatalf("SendBatch: %v", err)
	}
	big := 2 << 20 // over the client's and the broker's 1 MiB
	if err := s.Send(t.Context(), row("k4", "", big)); !errors.Is(err, outbox.ErrRefused) {
		t.Errorf("Send of %d bytes: %v, want outbox.ErrRefused", big, err)
	}
	if err := s.SendBatch(t.Context(), []*outbox.Message{row("k5", "c", 10), row("k6", "c", big)}); !errors.Is(err, outbox.ErrRefused) {
		t.Errorf("SendBatch with a row of %d bytes: %v, want outbox.ErrRefused", big, err)
	}

	cl := client(t, brokers, kgo.ConsumeTopics(topic))
	got := map[string]*kgo.Record{}
	// k5 may be stored or not: Kafka stores a batch record by record.
	for got["k1"] == nil || got["k2"] == nil || got["k3"] == nil {
		fs := cl.PollFetches(t.Context())
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) { got[kafka.KeyOf(r)] = r })
	}
	for _, k := range []string{"k1", "k2", "k3"} {
		if r, h := got[k], (kgo.RecordHeader{Key: "origin", Value: []byte("test")}); !hasHeader(r, h) {
			t.Errorf("%s: headers %v lack %v", k, r.Headers, h)
		}
	}
	if k := got["k1"].Key; k != nil {
		t.Errorf("a row without ordering key has Key %q", k)
	}
	if string(got["k2"].Key) != "customer-7" || got["k2"].Partition != got["k3"].Partition || got["k2"].Offset+1 != got["k3"].Offset {
		t.Errorf("the batch: k2 %q p%d@%d, k3 %q p%d@%d; want Key customer-7, one partition, in order",
			got["k2"].Key, got["k2"].Partition, got["k2"].Offset, got["k3"].Key, got["k3"].Partition, got["k3"].Offset)
	}
}

func hasHeader(r *kgo.Record, h kgo.RecordHeader) bool {
	for _, x := range r.Headers {
		if x.Key == h.Key && string(x.Value) == string(h.Value) {
			return true
		}
	}
	return false
}
