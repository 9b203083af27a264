package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
)

// The Kafka and NATS end-to-end benchmarks' workload, as remoting's
// BenchmarkEndToEnd has it on RocketMQ: messages of e2eBody's 200 bytes,
// each with its own key, consumed from the first one by a new consumer
// (group) per run with the handler doing nothing.
const (
	// e2eMessages is the size of the topic (stream): 2.5 times remoting's,
	// since Kafka without dedupe consumes 20,000 in about 10 ms, a figure
	// the 10 ms ticks of /proc's CPU times cannot resolve.
	e2eMessages = 50_000
	// e2eRounds is how many times each variant consumes the topic, the
	// variants taking turns; the figures are the medians.
	e2eRounds = 5
	// e2eTimeout bounds one consumption of the topic.
	e2eTimeout = 2 * time.Minute
	// e2eBatch is the batch size of the batch rows: messages per store
	// round trip for idemq, as in remoting's Redis-batch32.
	e2eBatch = 32
	// naiveLease is the naive consumer's claim expiry, the Guard's
	// default lease; naiveRetention its record's, the Consumer's default.
	naiveLease     = 30 * time.Second
	naiveRetention = 72 * time.Hour
)

// e2eBody is every message's body.
var e2eBody = bytes.Repeat([]byte("0123456789"), 20)

// e2eVariant is one way of consuming the topic: start begins consuming it
// as a new consumer named group, reporting its progress to m; the returned
// function stops it.
type e2eVariant struct {
	name  string
	start func(ctx context.Context, group string, m *meter) (stop func(), err error)
}

// meter times a consumption: from Begin, which the variant calls when it
// asks the broker for its first messages (its first handled message calls
// it otherwise), to the Seen call that brings the messages handled to n.
type meter struct {
	n       int64
	handled atomic.Int64
	begin   sync.Once
	end     sync.Once
	done    chan struct{}
	// onBegin and onEnd run once each, at the two ends of the window.
	onBegin, onEnd func()
}

// Begin starts the timing, once.
func (m *meter) Begin() { m.begin.Do(m.onBegin) }

// Seen counts k more messages handled: acknowledged, or marked for commit,
// as the variant does it.
func (m *meter) Seen(k int) {
	m.Begin()
	if m.handled.Add(int64(k)) >= m.n {
		m.end.Do(func() {
			m.onEnd()
			close(m.done)
		})
	}
}

// onlyVariant names the environment variable that restricts the
// end-to-end runs to one variant, for a CPU profile of it alone: e.g.
// IDEMQ_BENCH_VARIANT=idemq go test -bench KafkaEndToEnd -cpuprofile cpu.out.
// The labels of consumeAll cannot tell apart what the variants share: the
// garbage collector, and connections made before (nats.go's read loop).
const onlyVariant = "IDEMQ_BENCH_VARIANT"

// e2eRun consumes the topic e2eRounds times per variant (at least b.N),
// the first variant (ours) and its peers taking turns, and reports the
// medians as remoting's e2eRun does: ns/op, msgs/s and the CPU time per
// message of this process (cpu-µs/msg), of the broker (broker-µs/msg) and
// of Redis (redis-µs/msg) for the first variant, the same prefixed
// "<peer>-" for the others, and tax-% against the peer named dedupe-off.
func e2eRun(b *testing.B, broker, redisAddr string, variants []e2eVariant) {
	if only := os.Getenv(onlyVariant); only != "" {
		variants = slices.DeleteFunc(variants, func(v e2eVariant) bool { return v.name != only })
		if len(variants) == 0 {
			b.Fatalf("%s=%s names no variant", onlyVariant, only)
		}
	}
	pids := map[string]int{"cpu": os.Getpid()}
	for name, addr := range map[string]string{"broker": broker, "redis": redisAddr} {
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
			group := fmt.Sprintf("bench-%s-%s-%d", v.name, run, round)
			res, err := consumeAll(b.Context(), v, group, e2eMessages, pids)
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
	testkit.ReportRounds(b, names, results, e2eMessages, "dedupe-off")
}

// consumeAll runs v as group until it has handled n messages, and returns
// the rate, from the meter's Begin to its n-th message, and the CPU time of
// each of pids from v's start to then.
func consumeAll(ctx context.Context, v e2eVariant, group string, n int64, pids map[string]int) (testkit.Round, error) {
	var (
		first, end time.Time
		res        testkit.Round
		// cpuErr is the first failure to read a process's CPU time.
		cpuErr error
	)
	cpu := func(sign time.Duration) {
		if err := res.AddCPU(sign, pids); err != nil && cpuErr == nil {
			cpuErr = err
		}
	}
	// The CPU times are read before the variant starts rather than when
	// the timing begins: a reading takes about 10 ms per process (a scan of
	// /proc), during which the variant's other goroutines would handle
	// messages before the window opened. So they cover the consumer's
	// start and its group's join as well (a few milliseconds of CPU).
	m := &meter{n: n, done: make(chan struct{}),
		onBegin: func() { first = time.Now() },
		onEnd: func() {
			end = time.Now()
			cpu(+1)
		},
	}
	cpu(-1)
	// The variant's goroutines, and those they start, carry its name as a
	// profiler label: go test -cpuprofile, then go tool pprof
	// -tagfocus variant=idemq, shows one variant's CPU.
	var stop func()
	var err error
	pprof.Do(ctx, pprof.Labels("variant", v.name), func(ctx context.Context) {
		stop, err = v.start(ctx, group, m)
	})
	if err != nil {
		return res, err
	}
	defer stop()
	select {
	case <-m.done:
	case <-time.After(e2eTimeout):
		return res, fmt.Errorf("consumed %d of %d messages in %v", m.handled.Load(), n, e2eTimeout)
	}
	// Seen ran onBegin before onEnd, and both before done was closed.
	res.Rate = float64(n) / end.Sub(first).Seconds()
	return res, cpuErr
}

// newRedisStore returns a store on the test Redis whose keys start with
// prefix, and its client, closed when tb ends.
func newRedisStore(tb testing.TB, prefix string) (*redisdedupe.Store, *redis.Client) {
	tb.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: testenv.Redis(tb)})
	tb.Cleanup(func() { rdb.Close() })
	store, err := redisdedupe.New(rdb, redisdedupe.Config{Prefix: prefix})
	if err != nil {
		tb.Fatal(err)
	}
	return store, rdb
}

// naiveOnce is the naive consumer's per-message path, as remoting's
// naive variant has it: SET NX of a claim, the handler (which does
// nothing), SET of the done record, two round trips per message.
func naiveOnce(ctx context.Context, rdb *redis.Client, group, key string) error {
	k := "naive:" + group + ":" + key
	ok, err := rdb.SetNX(ctx, k, "processing", naiveLease).Result()
	if err != nil || !ok {
		return fmt.Errorf("SET NX = %v, %v", ok, err)
	}
	return rdb.Set(ctx, k, "done", naiveRetention).Err()
}

// noopHandler is idemq's handler: it does nothing.
func noopHandler(context.Context, *consumer.Message) error { return nil }
