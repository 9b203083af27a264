package bench

import (
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

	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
)

// TestWatermillDeduplicatorFailingHandler counts what the peer of the
// Kafka and NATS benchmarks, watermill's in-memory Deduplicator, does with
// a handler that fails a message once, on each broker: it records the key
// before the handler runs, so the message's redelivery is taken for a
// duplicate and acknowledged without running the handler. Of 101
// messages, 100 are applied and the failed one is lost. The test pins
// that count (it fails if watermill's behaviour changes, so that what
// docs/performance.md says of the peer is revisited).
func TestWatermillDeduplicatorFailingHandler(t *testing.T) {
	const n = 101
	for _, tc := range []struct {
		name string
		// subscribe returns a subscriber of topic holding run's messages.
		subscribe func(t *testing.T, topic, run string) message.Subscriber
	}{
		{"Kafka", func(t *testing.T, topic, run string) message.Subscriber {
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
			return sub
		}},
		{"NATS", func(t *testing.T, topic, run string) message.Subscriber {
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
			return sub
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			run := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
			topic := "watermill-failing-" + run
			sub := tc.subscribe(t, topic, run)
			failing := run + "-50"
			sent := make([]string, n)
			for i := range sent {
				sent[i] = fmt.Sprintf("%s-%d", run, i)
			}
			var (
				mu       sync.Mutex
				applied  = map[string]int{}
				attempts = map[string]int{}
				settled  int // deliveries that went through the middleware
			)
			stop, err := watermillRun(t.Context(), sub, topic, func(m *message.Message) error {
				key := m.Metadata.Get(msgkey.Property)
				mu.Lock()
				defer mu.Unlock()
				attempts[key]++
				if key == failing && attempts[key] == 1 {
					return errors.New("the handler's first attempt fails")
				}
				applied[key]++
				return nil
			}, func(h message.HandlerFunc) message.HandlerFunc {
				return func(m *message.Message) ([]*message.Message, error) {
					out, err := h(m)
					mu.Lock()
					settled++
					mu.Unlock()
					return out, err
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			// Each message once, and the failed one again.
			testkit.WaitFor(t, "101 deliveries and a redelivery", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return settled >= n+1
			})
			mu.Lock()
			tally := testkit.Count(sent, applied, nil)
			mu.Unlock()
			t.Logf("watermill's Deduplicator, a handler failing one message once, on %s: %v", tc.name, tally)
			if tally.Applied != n-1 || !slices.Equal(tally.Lost, []string{failing}) || len(tally.Doubled) > 0 {
				t.Errorf("got %v, lost %v; want the failed message %s lost and the other %d applied once", tally, tally.Lost, failing, n-1)
			}
		})
	}
}
