package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	wmkafka "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/kafka"
	"github.com/idemq/idemq/msgkey"
)

// kafkaPartitions is the benchmark topic's partition count: as many as
// remoting's topic has queues.
const kafkaPartitions = 8

// kafkaWarm is how many messages the broker serves before the timed runs,
// so that its JVM has compiled its hot paths.
const kafkaWarm = 300_000

// BenchmarkKafkaEndToEnd measures what dedupe costs a real Kafka consumer
// (internal/testenv: Apache Kafka 4.x, one node; franz-go): each variant
// consumes the whole topic (8 partitions) as a new group, timed from its
// first Fetch request to its e2eMessages-th handled record, the variants
// taking turns, medians of e2eRounds rounds:
//
//   - idemq: the adapter (package kafka's Receiver) with consumer.New over
//     redisdedupe, default options, a handler that does nothing;
//   - dedupe-off: franz-go's plain consumption at its defaults, a loop of
//     PollFetches, autocommit;
//   - naive: a hand-written consumer, one goroutine per partition of a
//     poll, each running SET NX, handler, SET per record on the same
//     Redis, then committing what it marked;
//   - watermill-dedup (default settings only): watermill's router with its
//     in-memory Deduplicator middleware (keyed by the record's idemq key
//     header) through watermill-kafka's subscriber (Sarama).
//
// The rows at batch 32 give the adapter 32 records of a partition per store
// round trip; the others have no such setting and run as at the defaults.
// CPU per message is given for this process, the broker's JVM and Redis,
// from the consumer's start. The broker is warmed with untimed traffic.
func BenchmarkKafkaEndToEnd(b *testing.B) {
	brokers := testenv.Kafka(b)
	redisAddr := testenv.Redis(b)
	run := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	topic := "bench-e2e-" + run
	kafkaTopic(b, brokers, topic, kafkaPartitions)
	kafkaFill(b, brokers, topic, run, e2eMessages)

	warm := topic + "-warm"
	const warmTopicSize = 100_000
	kafkaTopic(b, brokers, warm, kafkaPartitions)
	kafkaFill(b, brokers, warm, run+"-warm", warmTopicSize)
	start := time.Now()
	var warmRates []string
	for i := range kafkaWarm / warmTopicSize {
		res, err := consumeAll(b.Context(), kafkaPlain(brokers, warm), fmt.Sprintf("bench-warm-%s-%d", run, i), warmTopicSize, nil)
		if err != nil {
			b.Fatal(err)
		}
		warmRates = append(warmRates, fmt.Sprintf("%.0f", res.Rate))
	}
	warmed := fmt.Sprintf("warm-up: %d messages in %v, at %s msgs/s", kafkaWarm/warmTopicSize*warmTopicSize,
		time.Since(start).Round(time.Millisecond), strings.Join(warmRates, ", "))

	for _, batch := range []int{1, e2eBatch} {
		name := "Redis"
		if batch > 1 {
			name = fmt.Sprintf("Redis-batch%d", batch)
		}
		b.Run(name+"/idemq", func(b *testing.B) {
			b.Log(warmed)
			store, rdb := newRedisStore(b, "bench-kafka:"+run+":")
			variants := []e2eVariant{
				{"idemq", func(ctx context.Context, group string, m *meter) (func(), error) {
					c, err := consumer.New(store, group)
					if err != nil {
						return nil, err
					}
					r, err := kafka.NewReceiver(c, func(context.Context, *consumer.Message) error {
						m.Seen(1)
						return nil
					}, kafka.ReceiverConfig{BatchSize: batch}, kafkaOpts(brokers, topic, group, m)...)
					if err != nil {
						return nil, err
					}
					ran := make(chan error, 1)
					go func() { ran <- r.Run(context.WithoutCancel(ctx)) }()
					return func() {
						if err := r.Drain(context.Background()); err != nil {
							b.Errorf("kafka Receiver: %v", err)
						}
						<-ran
					}, nil
				}},
				kafkaPlain(brokers, topic),
				kafkaNaive(brokers, topic, rdb),
			}
			if batch == 1 {
				variants = append(variants, kafkaWatermill(brokers, topic))
			}
			e2eRun(b, brokers, redisAddr, variants)
		})
	}
}

// kafkaTopic creates topic with the given partitions, deleted when b ends.
func kafkaTopic(b testing.TB, brokers, topic string, partitions int32) {
	b.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		b.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = adm.DeleteTopics(ctx, topic)
		cl.Close()
	})
	resp, err := adm.CreateTopic(b.Context(), partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		b.Fatalf("create topic %s: %v", topic, err)
	}
	// The broker serves the topic a moment after its creation is answered
	// (see kafka's createTopic).
	testkit.WaitFor(b, "topic "+topic+" served", func() bool {
		td, err := adm.ListTopics(b.Context(), topic)
		d, ok := td[topic]
		if err != nil || !ok || d.Err != nil || len(d.Partitions) != int(partitions) {
			return false
		}
		for _, p := range d.Partitions {
			if p.Err != nil || p.Leader < 0 {
				return false
			}
		}
		return true
	})
}

// kafkaFill sends n records of e2eBody to topic, round robin over its
// partitions, their idemq keys run-0, run-1, … in the msgkey.Property
// header, as the adapter's Producer stamps them.
func kafkaFill(b testing.TB, brokers, topic, run string, n int) {
	b.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	const batch = 1000
	rs := make([]*kgo.Record, 0, batch)
	for i := range n {
		rs = append(rs, &kgo.Record{Value: e2eBody, Headers: []kgo.RecordHeader{
			{Key: msgkey.Property, Value: fmt.Appendf(nil, "%s-%d", run, i)},
		}})
		if len(rs) == batch || i == n-1 {
			if err := cl.ProduceSync(b.Context(), rs...).FirstErr(); err != nil {
				b.Fatalf("produce to %s: %v", topic, err)
			}
			rs = rs[:0]
		}
	}
}

// kafkaClient is a consumer of topic in group from its first offset,
// franz-go's defaults otherwise, that begins m with its first fetch.
func kafkaClient(brokers, topic, group string, m *meter, opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append(kafkaOpts(brokers, topic, group, m), opts...)...)
}

// kafkaOpts are kafkaClient's options.
func kafkaOpts(brokers, topic, group string, m *meter) []kgo.Opt {
	return []kgo.Opt{
		kgo.WithHooks(fetchHook{m}),
		kgo.SeedBrokers(brokers),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}
}

// fetchHook begins a meter when its client sends its first Fetch request:
// a client that fetches the whole topic in a few responses would
// otherwise be timed from records it already holds.
type fetchHook struct{ m *meter }

// OnBrokerWrite implements kgo.HookBrokerWrite.
func (h fetchHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == fetchKey && err == nil {
		h.m.Begin()
	}
}

// fetchKey is the Kafka protocol's API key of a Fetch request.
const fetchKey = 1

// fetchDialer dials as net.Dialer does, and begins m when the first Fetch
// request is written on a connection: Sarama's twin of fetchHook. Sarama
// writes each request in one Write: its size (4 bytes), then its API key.
type fetchDialer struct {
	net.Dialer
	m *meter
}

func (d fetchDialer) Dial(network, addr string) (net.Conn, error) {
	c, err := d.Dialer.Dial(network, addr)
	if err != nil {
		return nil, err
	}
	return fetchConn{c, d.m}, nil
}

type fetchConn struct {
	net.Conn
	m *meter
}

func (c fetchConn) Write(p []byte) (int, error) {
	if len(p) >= 6 && binary.BigEndian.Uint16(p[4:6]) == fetchKey {
		c.m.Begin()
	}
	return c.Conn.Write(p)
}

// pollLoop polls cl until ctx ends, handing each poll's fetches to h, and
// returns a function that stops it and closes cl.
func pollLoop(ctx context.Context, cl *kgo.Client, h func(context.Context, kgo.Fetches)) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			if fs.IsClientClosed() {
				return
			}
			h(ctx, fs)
		}
	}()
	return func() {
		cancel()
		<-done
		cl.Close()
	}
}

// kafkaPlain is dedupe-off: franz-go's poll loop at its defaults
// (autocommit of what was polled every 5 s), a handler that does nothing.
func kafkaPlain(brokers, topic string) e2eVariant {
	return e2eVariant{"dedupe-off", func(ctx context.Context, group string, m *meter) (func(), error) {
		cl, err := kafkaClient(brokers, topic, group, m)
		if err != nil {
			return nil, err
		}
		return pollLoop(ctx, cl, func(_ context.Context, fs kgo.Fetches) {
			n := 0
			fs.EachRecord(func(*kgo.Record) { n++ })
			if n > 0 {
				m.Seen(n)
			}
		}), nil
	}}
}

// kafkaNaive is naive: one goroutine per partition of a poll runs SET NX,
// handler, SET for each of its records in order, then the poll's records
// are marked for the next autocommit.
func kafkaNaive(brokers, topic string, rdb *redis.Client) e2eVariant {
	return e2eVariant{"naive", func(ctx context.Context, group string, m *meter) (func(), error) {
		cl, err := kafkaClient(brokers, topic, group, m, kgo.AutoCommitMarks())
		if err != nil {
			return nil, err
		}
		return pollLoop(ctx, cl, func(ctx context.Context, fs kgo.Fetches) {
			var wg sync.WaitGroup
			fs.EachPartition(func(p kgo.FetchTopicPartition) {
				wg.Go(func() {
					for _, r := range p.Records {
						if err := naiveOnce(ctx, rdb, group, kafkaKey(r)); err != nil {
							return // stops here: the bench times out
						}
						cl.MarkCommitRecords(r)
						m.Seen(1)
					}
				})
			})
			wg.Wait()
		}), nil
	}}
}

// kafkaKey is r's idemq key.
func kafkaKey(r *kgo.Record) string {
	for _, h := range r.Headers {
		if h.Key == msgkey.Property {
			return string(h.Value)
		}
	}
	return ""
}

// kafkaWatermill is watermill-dedup: watermill's router with its in-memory
// Deduplicator over watermill-kafka's subscriber at its defaults (Sarama,
// one goroutine per partition, each message acknowledged before the next;
// offsets marked and autocommitted every second), but for the oldest
// offset as the new group's start.
func kafkaWatermill(brokers, topic string) e2eVariant {
	return e2eVariant{"watermill-dedup", func(ctx context.Context, group string, m *meter) (func(), error) {
		sc := wmkafka.DefaultSaramaSubscriberConfig()
		sc.Consumer.Offsets.Initial = sarama.OffsetOldest
		sc.Net.Proxy.Enable, sc.Net.Proxy.Dialer = true, fetchDialer{m: m}
		sub, err := wmkafka.NewSubscriber(wmkafka.SubscriberConfig{
			Brokers:               []string{brokers},
			Unmarshaler:           wmkafka.DefaultMarshaler{},
			OverwriteSaramaConfig: sc,
			ConsumerGroup:         group,
		}, nil)
		if err != nil {
			return nil, err
		}
		return watermillRun(ctx, sub, topic, func(*message.Message) error {
			m.Seen(1)
			return nil
		})
	}}
}

// watermillRun runs h for topic's messages from sub through a watermill
// router with the in-memory Deduplicator, keyed by the idemq key in the
// message's metadata, inside the outer middlewares, and returns a
// function that stops it.
func watermillRun(ctx context.Context, sub message.Subscriber, topic string, h func(*message.Message) error, outer ...message.HandlerMiddleware) (func(), error) {
	r, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		return nil, err
	}
	dd := &middleware.Deduplicator{KeyFactory: func(m *message.Message) (string, error) {
		return m.Metadata.Get(msgkey.Property), nil
	}}
	r.AddMiddleware(append(outer, dd.Middleware)...)
	r.AddConsumerHandler("bench", topic, sub, h)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	select {
	case <-r.Running():
	case err := <-done:
		cancel()
		return nil, fmt.Errorf("watermill router: %v", err)
	}
	return func() {
		cancel()
		<-done
	}, nil
}
