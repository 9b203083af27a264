package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	wmkafka "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	wmjs "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/jetstream"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/kafka"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/natsjs"
)

// TestFailingHandler counts what the end-to-end benchmarks' peer,
// watermill's in-memory Deduplicator, and idemq do with a handler that
// fails one of 101 messages once, on each broker. The Deduplicator
// records a key before the handler runs, so the failed message's
// redelivery is taken for a duplicate and acknowledged without running
// the handler: 100 applied, the failed one lost. idemq records a key once
// its handler succeeded, so the retry runs it: 101 applied, each once.
// The test pins both counts (should watermill's change, what
// docs/performance.md says of it must be revisited).
func TestFailingHandler(t *testing.T) {
	const n = 101
	for _, tc := range []struct {
		name string
		// consume runs h for the messages of topic, which holds run's,
		// and returns a function that stops it; h's error fails the
		// message's attempt. watermill's calls delivered for each
		// delivery its Deduplicator has decided.
		consume func(t *testing.T, topic, run string, h func(key string) error, delivered func()) (stop func())
		// lost is whether the failed message is lost.
		lost bool
	}{
		{"watermill/Kafka", func(t *testing.T, topic, run string, h func(string) error, delivered func()) func() {
			brokers := testenv.Kafka(t)
			kafkaTopic(t, brokers, topic, 4)
			kafkaFill(t, brokers, topic, run, n)
			sc := wmkafka.DefaultSaramaSubscriberConfig()
			sc.Consumer.Offsets.Initial = sarama.OffsetOldest
			sub, err := wmkafka.NewSubscriber(wmkafka.SubscriberConfig{
				Brokers: []string{brokers}, Unmarshaler: wmkafka.DefaultMarshaler{},
				OverwriteSaramaConfig: sc, ConsumerGroup: topic,
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			return watermillConsume(t, sub, topic, h, delivered)
		}, true},
		{"watermill/NATS", func(t *testing.T, topic, run string, h func(string) error, delivered func()) func() {
			nc, js := natsConnect(t, testenv.NATS(t))
			natsStream(t, js, topic)
			natsFill(t, js, topic, run, n)
			own, err := nats.Connect(nc.ConnectedUrl())
			if err != nil {
				t.Fatal(err)
			}
			sub, err := wmjs.NewSubscriber(wmjs.SubscriberConfig{Conn: own, Logger: watermill.NopLogger{}})
			if err != nil {
				own.Close()
				t.Fatal(err)
			}
			return watermillConsume(t, sub, topic, h, delivered)
		}, true},
		{"idemq/Kafka", func(t *testing.T, topic, run string, h func(string) error, delivered func()) func() {
			brokers := testenv.Kafka(t)
			kafkaTopic(t, brokers, topic, 4)
			kafkaFill(t, brokers, topic, run, n)
			r, err := kafka.NewReceiver(idemqConsumer(t, topic), idemqHandler(h), kafka.ReceiverConfig{},
				kgo.SeedBrokers(brokers), kgo.ConsumerGroup(topic), kgo.ConsumeTopics(topic))
			if err != nil {
				t.Fatal(err)
			}
			ran := make(chan error, 1)
			go func() { ran <- r.Run(context.Background()) }()
			return func() {
				if err := r.Drain(context.Background()); err != nil {
					t.Errorf("drain: %v", err)
				}
				<-ran
			}
		}, false},
		{"idemq/NATS", func(t *testing.T, topic, run string, h func(string) error, delivered func()) func() {
			_, js := natsConnect(t, testenv.NATS(t))
			stream := natsStream(t, js, topic)
			natsFill(t, js, topic, run, n)
			jc, remove, err := natsConsumer(t.Context(), stream, topic)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(remove)
			r, err := natsjs.Pull(idemqConsumer(t, topic), jc, idemqHandler(h), natsjs.PullConfig{})
			if err != nil {
				t.Fatal(err)
			}
			ran := make(chan error, 1)
			go func() { ran <- r.Run(context.Background()) }()
			return func() {
				if err := r.Close(); err != nil {
					t.Errorf("close: %v", err)
				}
				<-ran
			}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			run := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
			topic := "failing-" + run
			failing := run + "-50"
			sent := make([]string, n)
			for i := range sent {
				sent[i] = fmt.Sprintf("%s-%d", run, i)
			}
			var (
				mu       sync.Mutex
				applied  = map[string]int{}
				attempts = map[string]int{}
				decided  int // deliveries watermill's Deduplicator decided
			)
			stop := sync.OnceFunc(tc.consume(t, topic, run, func(key string) error {
				mu.Lock()
				defer mu.Unlock()
				attempts[key]++
				if key == failing && attempts[key] == 1 {
					return errors.New("the handler's first attempt fails")
				}
				applied[key]++
				return nil
			}, func() {
				mu.Lock()
				decided++
				mu.Unlock()
			}))
			defer stop()
			// Each message once, and the failed one again: run by idemq,
			// or taken for a duplicate by watermill (deliveries counts it).
			testkit.WaitFor(t, "every message and the failed one's redelivery", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(applied) == n || decided == n+1
			})
			stop()
			mu.Lock()
			tally := testkit.Count(sent, applied, nil)
			mu.Unlock()
			t.Logf("a handler failing one message once, %s: %v", tc.name, tally)
			want := []string(nil)
			if tc.lost {
				want = []string{failing}
			}
			if !slices.Equal(tally.Lost, want) || len(tally.Doubled)+len(tally.Extra) > 0 {
				t.Errorf("got %v, lost %v; want lost %v, the others applied once", tally, tally.Lost, want)
			}
		})
	}
}

// watermillConsume runs h through a watermill router with the in-memory
// Deduplicator (watermillRun), calling delivered for each delivery once
// the Deduplicator and the handler are done with it; the returned function
// stops the router.
func watermillConsume(t *testing.T, sub message.Subscriber, topic string, h func(string) error, delivered func()) func() {
	stop, err := watermillRun(t.Context(), sub, topic, func(m *message.Message) error {
		return h(m.Metadata.Get(msgkey.Property))
	}, func(next message.HandlerFunc) message.HandlerFunc {
		return func(m *message.Message) ([]*message.Message, error) {
			defer delivered()
			return next(m)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return stop
}

// idemqConsumer is a Consumer of group over redisdedupe on the test Redis.
func idemqConsumer(t *testing.T, group string) *consumer.Consumer {
	store, _ := newRedisStore(t, "bench-failing:")
	c, err := consumer.New(store, group)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// idemqHandler runs h with the message's idemq key.
func idemqHandler(h func(string) error) consumer.Handler {
	return func(_ context.Context, m *consumer.Message) error {
		return h(m.Properties[msgkey.Property])
	}
}
