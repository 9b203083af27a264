package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/kafka"
	"github.com/idemq/idemq/msgkey"
)

// keySource hands out k1, k2, … or fails with err.
type keySource struct {
	n   int
	err error
}

func (s *keySource) NextKey(context.Context) (string, error) {
	if s.err != nil {
		return "", s.err
	}
	s.n++
	return fmt.Sprintf("k%d", s.n), nil
}

// newProducer is a Producer on a client that never connects: stamping needs
// no broker.
func newProducer(t testing.TB, keys msgkey.Source) *kafka.Producer {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	p, err := kafka.NewProducer(cl, keys)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestStamp(t *testing.T) {
	boom := errors.New("clock moved backwards")
	for _, tc := range []struct {
		name    string
		headers []kgo.RecordHeader
		src     *keySource
		want    string
		wantErr error
	}{
		{"Fresh", nil, &keySource{}, "k1", nil},
		{"KeptBusinessKey", []kgo.RecordHeader{{Key: msgkey.Property, Value: []byte("order-42")}}, &keySource{}, "order-42", nil},
		{"LastHeaderWins", []kgo.RecordHeader{{Key: msgkey.Property, Value: []byte("old")}, {Key: msgkey.Property, Value: []byte("new")}}, &keySource{}, "new", nil},
		{"OtherHeadersKept", []kgo.RecordHeader{{Key: "trace", Value: []byte("x")}}, &keySource{}, "k1", nil},
		{"SourceFails", nil, &keySource{err: boom}, "", boom},
		{"Invalid", []kgo.RecordHeader{{Key: msgkey.Property, Value: []byte("bad\x01key")}}, &keySource{}, "", msgkey.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProducer(t, tc.src)
			r := &kgo.Record{Topic: "t", Key: []byte("customer-7"), Headers: tc.headers}
			n := len(tc.headers)
			err := p.Stamp(t.Context(), r)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Stamp: %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				if len(r.Headers) != n {
					t.Errorf("a failed Stamp changed the headers: %v", r.Headers)
				}
				return
			}
			if got := kafka.KeyOf(r); got != tc.want {
				t.Errorf("key %q, want %q", got, tc.want)
			}
			if string(r.Key) != "customer-7" {
				t.Errorf("record Key %q changed", r.Key)
			}
			// Stamped again, as before a retry: nothing changes.
			before := len(r.Headers)
			if err := p.Stamp(t.Context(), r); err != nil || kafka.KeyOf(r) != tc.want || len(r.Headers) != before {
				t.Errorf("second Stamp: %v, key %q, %d headers (had %d)", err, kafka.KeyOf(r), len(r.Headers), before)
			}
			if tc.src.n > 1 {
				t.Errorf("%d keys drawn, want at most 1", tc.src.n)
			}
		})
	}
}

func TestStampRefuses(t *testing.T) {
	p := newProducer(t, &keySource{})
	if err := p.Stamp(t.Context()); err == nil {
		t.Error("no records: no error")
	}
	if err := p.Stamp(t.Context(), nil); err == nil {
		t.Error("nil record: no error")
	}
	if _, err := kafka.NewProducer(nil, &keySource{}); err == nil {
		t.Error("nil client: no error")
	}
}

// BenchmarkStamp32 stamps a batch of 32 records, fresh each time.
func BenchmarkStamp32(b *testing.B) {
	p := newProducer(b, &keySource{})
	rs := make([]*kgo.Record, 32)
	b.ReportAllocs()
	for b.Loop() {
		for i := range rs {
			rs[i] = &kgo.Record{Topic: "t", Value: []byte("v")}
		}
		if err := p.Stamp(b.Context(), rs...); err != nil {
			b.Fatal(err)
		}
	}
}

// TestProducerAgainstBroker produces records with ProduceSync and Produce:
// each arrives with its key header and its own Key, and a record produced
// again arrives with the same key.
func TestProducerAgainstBroker(t *testing.T) {
	t.Parallel()
	brokers := []string{testenv.Kafka(t)}
	topic := unique("producer")
	createTopic(t, brokers, topic, 4)
	p := producer(t, brokers)
	a := &kgo.Record{Topic: topic, Key: []byte("customer-1"), Value: []byte("a")}
	b := &kgo.Record{Topic: topic, Key: []byte("customer-2"), Value: []byte("b")}
	if _, err := p.ProduceSync(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	if err := p.Produce(t.Context(), b, func(_ *kgo.Record, err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	keyA := kafka.KeyOf(a)
	if _, err := p.ProduceSync(t.Context(), a); err != nil { // again, as after a timeout
		t.Fatal(err)
	}
	cl := client(t, brokers, kgo.ConsumeTopics(topic))
	var got []*kgo.Record
	for len(got) < 3 {
		fs := cl.PollFetches(t.Context())
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got = append(got, fs.Records()...)
	}
	keys := map[string]int{}
	for _, r := range got {
		keys[kafka.KeyOf(r)]++
		if want := map[string]string{"a": "customer-1", "b": "customer-2"}[string(r.Value)]; string(r.Key) != want {
			t.Errorf("record %s has Key %q, want %q", r.Value, r.Key, want)
		}
	}
	if keys[keyA] != 2 || keys[kafka.KeyOf(b)] != 1 || len(keys) != 2 {
		t.Errorf("keys received %v; want %s twice and %s once", keys, keyA, kafka.KeyOf(b))
	}
}
