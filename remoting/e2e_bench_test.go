package remoting_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/remoting"
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
// Each row also has the CPU time per message of this process (the
// consumer: cpu-µs/msg), of the store's server (redis-µs/msg, db-µs/msg)
// and of the broker (broker-µs/msg), read from /proc over the timed
// window, so that a ratio can be told apart from a machine's load. The
// broker's includes what it spends per second whatever the rate (long
// polls, heartbeats, flushes), so a slower variant's is higher.
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
		res, err := consumeAll(ns, warm, fmt.Sprintf("bench-warm-%s-%d", run, i), warmTopicSize, 1, nil, plain)
		if err != nil {
			b.Fatal(err)
		}
		warmRates = append(warmRates, fmt.Sprintf("%.0f", res.Rate))
	}
	warmed := fmt.Sprintf("warm-up: %d messages in %v, at %s msgs/s", e2eWarm/warmTopicSize*warmTopicSize,
		time.Since(start).Round(time.Millisecond), strings.Join(warmRates, ", "))

	for _, batch := range []int{1, 32} {
		name := "Redis"
		if batch > 1 {
			name = fmt.Sprintf("Redis-batch%d", batch)
		}
		b.Run(name+"/idemq", func(b *testing.B) {
			b.Log(warmed)
			store, rdb := newRedisStore(b, "bench-e2e:"+run+":")
			e2eRun(b, ns, topic, batch, map[string]string{"redis": rdb.Options().Addr}, []e2eVariant{
				{"idemq", func(group string) (callback, error) {
					c, err := consumer.New(store, group)
					if err != nil {
						return nil, err
					}
					return remoting.Concurrently(c, noopHandler), nil
				}},
				{"dedupe-off", func(string) (callback, error) { return plain, nil }},
				{"naive", func(group string) (callback, error) {
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
	}

	for _, d := range testdb.Backends {
		b.Run(d.Name+"-tx/idemq", func(b *testing.B) { benchTxEndToEnd(b, ns, topic, d) })
	}
}

// e2eVariant is one way of consuming: its name, and the callback of a
// consumer of group.
type e2eVariant struct {
	name string
	cb   func(group string) (callback, error)
}

// e2eRun consumes topic once per variant per round, each consumer taking
// up to batch messages per callback, the first variant (ours) and its peers
// taking turns, and reports the medians: ns/op, msgs/s and the CPU time per
// message of this process (the consumer's: cpu-µs/msg), of the broker
// (broker-µs/msg) and of each of servers (name → listening address:
// <name>-µs/msg) for the first variant, the same prefixed "<peer>-" for
// the others, and tax-% per peer named "dedupe-off" or "plain-insert".
func e2eRun(b *testing.B, ns, topic string, batch int, servers map[string]string, variants []e2eVariant) {
	broker, err := brokerPID(b.Context(), ns)
	if err != nil {
		b.Fatal(err)
	}
	pids := map[string]int{"cpu": os.Getpid(), "broker": broker}
	for name, addr := range servers {
		pid, err := testkit.ListenerPID(addr)
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		pids[name] = pid
	}
	results := make([][]testkit.Round, len(variants))
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
			res, err := consumeAll(ns, topic, group, e2eMessages, batch, pids, cb)
			if err != nil {
				b.Fatalf("%s: %v", v.name, err)
			}
			results[i] = append(results[i], res)
		}
	}
	names := make([]string, len(variants))
	for i, v := range variants {
		names[i] = v.name
	}
	testkit.ReportRounds(b, names, results, e2eMessages, "dedupe-off", "plain-insert")
}

// fillTopic sends n messages of pathBody to topic, keyed run-0, run-1, ….
func fillTopic(b *testing.B, ns, topic, run string, n int) {
	b.Helper()
	p, err := rocketmq.NewProducer(producerOptions(ns, "bench-e2e-producer-"+run)...)
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
// of group, with the client's default settings but for up to batch messages
// per callback, until cb has acknowledged n messages, and returns the rate
// and the CPU time of each of pids from its first callback to then.
func consumeAll(ns, topic, group string, n int64, batch int, pids map[string]int, cb callback) (testkit.Round, error) {
	var (
		acked atomic.Int64
		first atomic.Int64 // UnixNano of the first callback
		end   time.Time
		once  sync.Once
		done  = make(chan struct{})
		res   testkit.Round
		// cpuErr is the first failure to read a process's CPU time.
		cpuErr error
	)
	cpu := func(sign time.Duration) {
		if err := res.AddCPU(sign, pids); err != nil && cpuErr == nil {
			cpuErr = err
		}
	}
	c, err := rocketmq.NewPushConsumer(
		rmq.WithNsResolver(primitive.NewPassthroughResolver([]string{ns})),
		rmq.WithGroupName(group),
		rmq.WithInstance(group),
		rmq.WithConsumeFromWhere(rmq.ConsumeFromFirstOffset),
		rmq.WithConsumeMessageBatchMaxSize(batch),
	)
	if err != nil {
		return res, err
	}
	var started sync.Once
	err = c.Subscribe(topic, rmq.MessageSelector{}, func(ctx context.Context, msgs ...*primitive.MessageExt) (rmq.ConsumeResult, error) {
		started.Do(func() {
			cpu(-1)
			first.Store(time.Now().UnixNano())
		})
		r, err := cb(ctx, msgs...)
		if r == rmq.ConsumeSuccess {
			if acked.Add(int64(len(msgs))) >= n {
				once.Do(func() {
					end = time.Now()
					cpu(+1)
					close(done)
				})
			}
		}
		return r, err
	})
	if err != nil {
		return res, err
	}
	if err := c.Start(); err != nil {
		return res, err
	}
	defer c.Shutdown()
	select {
	case <-done:
	case <-time.After(e2eTimeout):
		return res, fmt.Errorf("consumed %d of %d messages of %s in %v", acked.Load(), n, topic, e2eTimeout)
	}
	res.Rate = float64(n) / end.Sub(time.Unix(0, first.Load())).Seconds()
	return res, cpuErr
}
