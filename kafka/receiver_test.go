package kafka_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/kafka"
	"github.com/idemq/idemq/msgkey"
)

func TestNewReceiverRefuses(t *testing.T) {
	c, err := consumer.New(memdedupe.New(memdedupe.Config{}), "g")
	if err != nil {
		t.Fatal(err)
	}
	h := func(context.Context, *consumer.Message) error { return nil }
	seed := kgo.SeedBrokers("127.0.0.1:1")
	for _, tc := range []struct {
		name string
		cfg  kafka.ReceiverConfig
		opts []kgo.Opt
		want string
	}{
		{"NoGroup", kafka.ReceiverConfig{}, []kgo.Opt{seed, kgo.ConsumeTopics("t")}, "kgo.ConsumerGroup"},
		{"NoTopics", kafka.ReceiverConfig{}, []kgo.Opt{seed, kgo.ConsumerGroup("g")}, "kgo.ConsumeTopics"},
		{"AutocommitOff", kafka.ReceiverConfig{}, []kgo.Opt{seed, kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t"), kgo.DisableAutoCommit()}, "autocommit"},
		{"BatchSize", kafka.ReceiverConfig{BatchSize: -1}, []kgo.Opt{seed, kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t")}, "batch size"},
		{"MaxBuffered", kafka.ReceiverConfig{BatchSize: 8, MaxBuffered: 4}, []kgo.Opt{seed, kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t")}, "max buffered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := kafka.NewReceiver(c, h, tc.cfg, tc.opts...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewReceiver: %v, %v; want an error naming %q", r, err, tc.want)
			}
		})
	}
}

// TestRevokeEndsBusyWait: a receiver waits for two keys another consumer
// holds, one on each partition; a second receiver joins, and the revoke of
// one partition ends its wait at once (the record held, not committed)
// although the rebalance timeout is long; the second receiver gets the
// record and waits for its key in turn; once the keys are free each is
// applied once.
func TestRevokeEndsBusyWait(t *testing.T) {
	t.Parallel()
	brokers := []string{testenv.Kafka(t)}
	topic, group := unique("revoke-wait"), unique("revoke-wait-group")
	createTopic(t, brokers, topic, 2)
	store := memdedupe.New(memdedupe.Config{})
	var (
		mu      sync.Mutex
		applied = map[string]int{}
	)
	h := func(_ context.Context, m *consumer.Message) error {
		mu.Lock()
		defer mu.Unlock()
		applied[msgkey.Of(m)]++
		return nil
	}
	start := func() *consumer.Consumer {
		c, err := consumer.New(store, group)
		if err != nil {
			t.Fatal(err)
		}
		r, err := kafka.NewReceiver(c, h, kafka.ReceiverConfig{}, kgo.SeedBrokers(brokers...), kgo.ConsumerGroup(group),
			kgo.ConsumeTopics(topic), kgo.RebalanceTimeout(10*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		go r.Run(t.Context())
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := r.Drain(ctx); err != nil {
				t.Error(err)
			}
		})
		return c
	}
	// A key for each partition, held elsewhere.
	var keys []string
	var tickets []dedupe.Ticket
	p, err := kafka.NewProducer(client(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner())), testkit.Keys(t, 4))
	if err != nil {
		t.Fatal(err)
	}
	for part := int32(0); part < 2; part++ {
		k := unique("busy")
		res, err := testkit.Claim(t.Context(), store, dedupe.Item{Ref: dedupe.Ref{Group: group, Key: k}}, 10*time.Minute)
		if err != nil || res.Outcome != dedupe.Acquired {
			t.Fatalf("hold %s: %v %v", k, res.Outcome, err)
		}
		keys = append(keys, k)
		tickets = append(tickets, dedupe.Ticket{Ref: dedupe.Ref{Group: group, Key: k}, Token: res.Token})
		r := &kgo.Record{Topic: topic, Partition: part, Value: []byte(k), Headers: []kgo.RecordHeader{{Key: msgkey.Property, Value: []byte(k)}}}
		if _, err := p.ProduceSync(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	first := start()
	testkit.WaitFor(t, "the first receiver to wait for both keys", func() bool { return first.Stats().Waited == 2 })
	second := start()
	// Without the revoke ending the wait, the second would get the record
	// only after half the rebalance timeout: five minutes.
	testkit.WaitFor(t, "the second receiver to get a record and wait", func() bool { return second.Stats().Waited == 1 })
	if s := first.Stats(); s.Canceled != 1 {
		t.Errorf("the first receiver held %d records, want 1", s.Canceled)
	}
	for _, tk := range tickets {
		if err := testkit.Release(t.Context(), store, tk); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, "both keys applied", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return applied[keys[0]] > 0 && applied[keys[1]] > 0
	})
	time.Sleep(time.Second)
	mu.Lock()
	defer mu.Unlock()
	testkit.Count(keys, applied, nil).Check(t)
}

// TestBusyWaitOutlastsSession: a record whose key another consumer holds
// is waited for longer than the group's session and rebalance timeouts
// (6 s): the client heartbeats meanwhile, so the member keeps its
// partition, and the record runs once, on its first delivery, when the
// key comes free.
func TestBusyWaitOutlastsSession(t *testing.T) {
	t.Parallel()
	brokers := []string{testenv.Kafka(t)}
	topic, group := unique("busy-session"), unique("busy-session-group")
	createTopic(t, brokers, topic, 1)
	store := memdedupe.New(memdedupe.Config{})
	key := unique("busy")
	ref := dedupe.Ref{Group: group, Key: key}
	res, err := testkit.Claim(t.Context(), store, dedupe.Item{Ref: ref}, 10*time.Minute)
	if err != nil || res.Outcome != dedupe.Acquired {
		t.Fatalf("hold %s: %v %v", key, res.Outcome, err)
	}
	c, err := consumer.New(store, group)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		runs []int32
	)
	r, err := kafka.NewReceiver(c, func(_ context.Context, m *consumer.Message) error {
		mu.Lock()
		defer mu.Unlock()
		runs = append(runs, m.Reconsumed)
		return nil
	}, kafka.ReceiverConfig{}, kgo.SeedBrokers(brokers...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.SessionTimeout(6*time.Second), kgo.RebalanceTimeout(6*time.Second), kgo.HeartbeatInterval(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	go r.Run(t.Context())
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := r.Drain(ctx); err != nil {
			t.Error(err)
		}
	}()
	rs := []*kgo.Record{{Topic: topic, Value: []byte(key), Headers: []kgo.RecordHeader{{Key: msgkey.Property, Value: []byte(key)}}}}
	if _, err := producer(t, brokers).ProduceSync(t.Context(), rs...); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the receiver to wait for the key", func() bool { return c.Stats().Waited == 1 })
	time.Sleep(9 * time.Second) // the holder's run: past the session and rebalance timeouts
	if err := testkit.Release(t.Context(), store, dedupe.Ticket{Ref: ref, Token: res.Token}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the record to run", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(runs) > 0
	})
	time.Sleep(time.Second)
	mu.Lock()
	defer mu.Unlock()
	if s := c.Stats(); len(runs) != 1 || runs[0] != 0 || s.Canceled != 0 || s.Retried != 0 || s.Waited != 1 {
		t.Errorf("runs on reconsumes %v; held %d, retried %d, waited %d; want one run on the first delivery, never handed back",
			runs, s.Canceled, s.Retried, s.Waited)
	}
}

// TestRecordWithoutKey produces a record without a key header: the
// receiver does not run it and keeps retrying it (consumer.Stats.NoKey
// grows, nothing is applied), unless the Consumer has a key fallback;
// with the record's ID (topic/partition/offset) as fallback it is applied
// once.
func TestRecordWithoutKey(t *testing.T) {
	t.Parallel()
	brokers := []string{testenv.Kafka(t)}
	for _, tc := range []struct {
		name     string
		fallback bool
	}{{"NoFallback", false}, {"IDFallback", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			topic, group := unique("nokey"), unique("nokey-group")
			createTopic(t, brokers, topic, 1)
			if err := client(t, brokers).ProduceSync(t.Context(), &kgo.Record{Topic: topic, Value: []byte("keyless")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			opts := []consumer.Option{consumer.WithDelayLevels(50 * time.Millisecond)}
			if tc.fallback {
				opts = append(opts, consumer.WithKeyFallback(func(m *consumer.Message) string { return m.ID }))
			}
			c, err := consumer.New(memdedupe.New(memdedupe.Config{}), group, opts...)
			if err != nil {
				t.Fatal(err)
			}
			var applied atomic.Int64
			h := func(context.Context, *consumer.Message) error { applied.Add(1); return nil }
			r, err := kafka.NewReceiver(c, h, kafka.ReceiverConfig{}, kgo.SeedBrokers(brokers...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic))
			if err != nil {
				t.Fatal(err)
			}
			go r.Run(context.Background())
			defer func() {
				if err := r.Drain(context.Background()); err != nil {
					t.Errorf("drain: %v", err)
				}
			}()
			if tc.fallback {
				testkit.WaitFor(t, "the keyless record applied", func() bool { return applied.Load() == 1 })
				return
			}
			testkit.WaitFor(t, "the keyless record retried twice", func() bool { return c.Stats().NoKey >= 2 })
			if n := applied.Load(); n != 0 {
				t.Errorf("applied %d times without a key, want 0", n)
			}
		})
	}
}
