package remoting_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	rmqproducer "github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/consumer/remoting"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/msgkey"
)

// The end-to-end benchmark's workload, as in notes/perf.md: e2eMessages
// messages of pathBody's 200 bytes in a topic of e2eQueues queues, consumed
// by one push consumer with the client's default settings (20 callback
// goroutines, one message per callback, pulls of 32) from the first offset.
const (
	e2eMessages = 20_000
	e2eQueues   = 8
	// e2eRounds is how many times each variant consumes the topic, the
	// variants taking turns; the figures are the medians.
	e2eRounds = 3
	// e2eWarm is how many messages the broker serves before the timed
	// runs: its JVM speeds up from about 65k to 140k msgs/s over its first
	// ~500k (notes/perf.md).
	e2eWarm = 600_000
	// e2eTimeout bounds one consumption of the topic.
	e2eTimeout = 2 * time.Minute
)

// BenchmarkEndToEnd measures what dedupe costs a real consumer: one push
// consumer on the real broker (internal/testenv, Apache RocketMQ 4.9.7)
// consumes the whole topic, timed from its first callback to its
// e2eMessages-th acknowledged message, once per variant in each round:
//
//   - Redis: ns/op and msgs/s are the Consumer's over redisdedupe (default
//     options) with a handler that does nothing; dedupe-off-ns/op is a
//     plain callback answering ConsumeSuccess, naive-ns/op a hand-written
//     SET NX, handler, SET per message on the same Redis;
//   - SQLite-tx, MySQL-tx (MariaDB), Postgres-tx: the transactional mode
//     against plain handlers; see benchTxEndToEnd.
//
// The bench table shows each peer's ratio; the tax is 1 - 1/ratio, also
// reported as tax-% (and the peers' msgs/s as <peer>-msgs/s) in go test's
// output. The broker is warmed with untimed traffic first. One run of the
// benchmark's function is e2eRounds rounds whatever b.N is (at least b.N).
func BenchmarkEndToEnd(b *testing.B) {
	ns := testenv.RocketMQ(b)
	run := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	topic := "bench-e2e-" + run
	testenv.RocketMQTopic(b, topic, e2eQueues)
	fillTopic(b, ns, topic, run, e2eMessages)

	warm := topic + "-warm"
	testenv.RocketMQTopic(b, warm, e2eQueues)
	const warmTopicSize = 150_000
	fillTopic(b, ns, warm, run+"-warm", warmTopicSize)
	plain := func(context.Context, ...*primitive.MessageExt) (rmq.ConsumeResult, error) {
		return rmq.ConsumeSuccess, nil
	}
	start := time.Now()
	var warmRates []string
	for i := range e2eWarm / warmTopicSize {
		rate, err := consumeAll(ns, warm, fmt.Sprintf("bench-warm-%s-%d", run, i), warmTopicSize, plain)
		if err != nil {
			b.Fatal(err)
		}
		warmRates = append(warmRates, fmt.Sprintf("%.0f", rate))
	}
	warmed := fmt.Sprintf("warm-up: %d messages in %v, at %s msgs/s", e2eWarm/warmTopicSize*warmTopicSize,
		time.Since(start).Round(time.Millisecond), strings.Join(warmRates, ", "))

	b.Run("Redis/idemq", func(b *testing.B) {
		b.Log(warmed)
		store, rdb := newRedisStore(b, "bench-e2e:"+run+":")
		e2eRun(b, ns, topic, []e2eVariant{
			{"idemq", func(group string) (remoting.Callback, error) {
				c, err := consumer.New(store, group)
				if err != nil {
					return nil, err
				}
				return remoting.Concurrently(c, noopHandler), nil
			}},
			{"dedupe-off", func(string) (remoting.Callback, error) { return plain, nil }},
			{"naive", func(group string) (remoting.Callback, error) {
				return func(ctx context.Context, msgs ...*primitive.MessageExt) (rmq.ConsumeResult, error) {
					for _, m := range msgs {
						key := "naive:" + group + ":" + msgkey.Of(m)
						ok, err := rdb.SetNX(ctx, key, "processing", naiveLease).Result()
						if err != nil || !ok {
							return rmq.ConsumeRetryLater, fmt.Errorf("SET NX = %v, %v", ok, err)
						}
						if err := noopRaw(ctx, m); err != nil {
							rdb.Del(ctx, key)
							return rmq.ConsumeRetryLater, err
						}
						// The Consumer's default retention.
						if err := rdb.Set(ctx, key, "done", 72*time.Hour).Err(); err != nil {
							return rmq.ConsumeRetryLater, err
						}
					}
					return rmq.ConsumeSuccess, nil
				}, nil
			}},
		})
	})

	for _, d := range testdb.Backends {
		b.Run(d.Name+"-tx/idemq", func(b *testing.B) { benchTxEndToEnd(b, ns, topic, d) })
	}
}

// e2eVariant is one way of consuming: its name, and the callback of a
// consumer of group.
type e2eVariant struct {
	name string
	cb   func(group string) (remoting.Callback, error)
}

// e2eRun consumes topic once per variant per round, the first variant
// (ours) and its peers taking turns, and reports the medians: ns/op and
// msgs/s for the first, <peer>-ns/op and <peer>-msgs/s for the others, and
// tax-% per peer named "dedupe-off" or "plain-insert".
func e2eRun(b *testing.B, ns, topic string, variants []e2eVariant) {
	rates := make([][]float64, len(variants))
	run := fmt.Sprintf("%d", time.Now().UnixNano())
	for round := range max(b.N, e2eRounds) {
		for k := range variants {
			i := (round + k) % len(variants)
			v := variants[i]
			group := fmt.Sprintf("bench-e2e-%s-%s-%d", v.name, run, round)
			cb, err := v.cb(group)
			if err != nil {
				b.Fatal(err)
			}
			rate, err := consumeAll(ns, topic, group, e2eMessages, cb)
			if err != nil {
				b.Fatalf("%s: %v", v.name, err)
			}
			rates[i] = append(rates[i], rate)
		}
	}
	med := make([]float64, len(variants))
	var log strings.Builder
	for i, v := range variants {
		med[i] = median(rates[i])
		fmt.Fprintf(&log, "%s: %.0f msgs/s (rounds:", v.name, med[i])
		for _, r := range rates[i] {
			fmt.Fprintf(&log, " %.0f", r)
		}
		log.WriteString(")\n")
	}
	b.Log(strings.TrimSpace(log.String()))
	b.ReportMetric(1e9/med[0], "ns/op")
	b.ReportMetric(med[0], "msgs/s")
	for i, v := range variants[1:] {
		b.ReportMetric(1e9/med[i+1], v.name+"-ns/op")
		b.ReportMetric(med[i+1], v.name+"-msgs/s")
		if v.name == "dedupe-off" || v.name == "plain-insert" {
			b.ReportMetric(100*(1-med[0]/med[i+1]), "tax-%")
		}
	}
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// fillTopic sends n messages of pathBody to topic, keyed run-0, run-1, ….
func fillTopic(b *testing.B, ns, topic, run string, n int) {
	b.Helper()
	p, err := rocketmq.NewProducer(
		rmqproducer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns})),
		rmqproducer.WithGroupName("bench-e2e-producer-"+run),
		rmqproducer.WithInstanceName("bench-e2e-producer-"+run),
	)
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Start(); err != nil {
		b.Fatal(err)
	}
	defer p.Shutdown()
	// Batches of 64 (about 20 KiB), each to the next queue.
	const batch = 64
	msgs := make([]*primitive.Message, 0, batch)
	for i := range n {
		m := primitive.NewMessage(topic, pathBody)
		m.WithProperty(msgkey.Property, fmt.Sprintf("%s-%d", run, i))
		msgs = append(msgs, m)
		if len(msgs) == batch || i == n-1 {
			if _, err := p.SendSync(context.Background(), msgs...); err != nil {
				b.Fatalf("send to %s: %v", topic, err)
			}
			msgs = msgs[:0]
		}
	}
}

// consumeAll consumes topic from its first offset with a new push consumer
// of group, with the client's default settings, until cb has acknowledged
// n messages, and returns the rate from its first callback to then.
func consumeAll(ns, topic, group string, n int64, cb remoting.Callback) (float64, error) {
	var (
		acked atomic.Int64
		first atomic.Int64 // UnixNano of the first callback
		end   time.Time
		once  sync.Once
		done  = make(chan struct{})
	)
	c, err := rocketmq.NewPushConsumer(
		rmq.WithNsResolver(primitive.NewPassthroughResolver([]string{ns})),
		rmq.WithGroupName(group),
		rmq.WithInstance(group),
		rmq.WithConsumeFromWhere(rmq.ConsumeFromFirstOffset),
	)
	if err != nil {
		return 0, err
	}
	err = c.Subscribe(topic, rmq.MessageSelector{}, func(ctx context.Context, msgs ...*primitive.MessageExt) (rmq.ConsumeResult, error) {
		first.CompareAndSwap(0, time.Now().UnixNano())
		res, err := cb(ctx, msgs...)
		if res == rmq.ConsumeSuccess {
			if acked.Add(int64(len(msgs))) >= n {
				once.Do(func() {
					end = time.Now()
					close(done)
				})
			}
		}
		return res, err
	})
	if err != nil {
		return 0, err
	}
	if err := c.Start(); err != nil {
		return 0, err
	}
	defer c.Shutdown()
	select {
	case <-done:
	case <-time.After(e2eTimeout):
		return 0, fmt.Errorf("consumed %d of %d messages of %s in %v", acked.Load(), n, topic, e2eTimeout)
	}
	return float64(n) / end.Sub(time.Unix(0, first.Load())).Seconds(), nil
}
