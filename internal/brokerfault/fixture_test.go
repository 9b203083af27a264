package brokerfault

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	rmqproducer "github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testenv/remotingread"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/remoting"
)

// brokerLevels are the test broker's delay levels (internal/testenv): 18
// levels of 1s each.
var brokerLevels = slices.Repeat([]time.Duration{time.Second}, 18)

// retention keeps the dedupe records of a run long enough for the test and
// no longer: the Redis may be shared.
const retention = 10 * time.Minute

// fixture is what one scenario shares: a private RocketMQ cluster, the
// shared Redis, and a run name that keeps the run's groups, client
// instances and Redis keys apart from every other run's.
type fixture struct {
	t   *testing.T
	mq  *testenv.RocketMQServer
	rdb *redis.Client
	run string
	// producers counts the producers made, to name them apart.
	producers int
}

// newFixture starts a private cluster of brokers master brokers.
func newFixture(t *testing.T, name string, brokers int) *fixture {
	t.Helper()
	f := &fixture{t: t, run: fmt.Sprintf("%s-%d-%d", name, os.Getpid(), time.Now().UnixNano())}
	f.rdb = redis.NewClient(&redis.Options{Addr: testenv.Redis(t)})
	t.Cleanup(func() {
		// The dedupe records expire after retention; the ledger would not.
		f.rdb.Del(context.Background(), f.ledger())
		f.rdb.Close()
	})
	f.mq = startCluster(t, brokers)
	return f
}

// startCluster starts a private cluster of brokers master brokers, stopped
// when t ends.
func startCluster(t *testing.T, brokers int) *testenv.RocketMQServer {
	t.Helper()
	begin := time.Now()
	mq, err := testenv.StartRocketMQCluster(t.Context(), t.TempDir(), nil, testenv.RocketMQConfig{Brokers: brokers})
	if errors.Is(err, exec.ErrNotFound) {
		testenv.Missing(t, err.Error()) // a failure under CI=true
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := mq.Stop(); err != nil {
			t.Error(err)
		}
	})
	t.Logf(racechild.Figure+"RocketMQ %s, %d brokers %q, started in %v", mq.Version(), brokers, mq.BrokerNames(), time.Since(begin).Round(time.Millisecond))
	return mq
}

// topic creates the run's topic with queues queues on every broker.
func (f *fixture) topic(queues int) string {
	f.t.Helper()
	topic := "bf-" + f.run
	if err := f.mq.CreateTopic(f.t.Context(), topic, queues); err != nil {
		f.t.Fatal(err)
	}
	return topic
}

// group names the run's consumer group and creates its retry topic, which
// a consumer otherwise learns of only at its 30 s route refresh.
func (f *fixture) group() string {
	f.t.Helper()
	group := "bf-group-" + f.run
	if err := f.mq.CreateTopic(f.t.Context(), "%RETRY%"+group, 1); err != nil {
		f.t.Fatal(err)
	}
	return group
}

// ledger is the Redis hash the run's handler counts each applied key in.
func (f *fixture) ledger() string { return "bf:" + f.run + ":ledger" }

// store is the run's Redis dedupe store.
func (f *fixture) store() *redisdedupe.Store {
	f.t.Helper()
	s, err := redisdedupe.New(f.rdb, redisdedupe.Config{Prefix: "bf:" + f.run + ":dedupe:"})
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// guard is the consumer's guard: a 10 s lease, renewed every third of it.
// Handlers take milliseconds; the lease only needs to outlast a starved
// renewal on two cores busy with three JVMs and the race detector.
func guard() dedupe.GuardConfig {
	return dedupe.GuardConfig{Lease: 10 * time.Second, Retention: retention}
}

// producer returns a started producer that stamps keys; it is shut down
// when the test ends. rocketmq-client-go retries a failed attempt on
// another broker (1 + 2 attempts by default; rmqproducer.WithRetry).
func (f *fixture) producer(opts ...rmqproducer.Option) *remoting.Producer {
	f.t.Helper()
	f.producers++
	name := fmt.Sprintf("bf-producer-%s-%d", f.run, f.producers)
	rp, err := rocketmq.NewProducer(append([]rmqproducer.Option{
		rmqproducer.WithNsResolver(primitive.NewPassthroughResolver([]string{f.mq.NameServer()})),
		rmqproducer.WithGroupName(name),
		rmqproducer.WithInstanceName(name),
	}, opts...)...)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := rp.Start(); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { rp.Shutdown() })
	// Generators of one node issue the same keys: one node per producer.
	p, err := remoting.NewProducer(rp, testkit.Keys(f.t, int64(f.producers)))
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

// pushConsumer returns a push consumer of group that reads new groups'
// queues from the start.
func (f *fixture) pushConsumer(group string, opts ...rmq.Option) rocketmq.PushConsumer {
	f.t.Helper()
	pc, err := remotingread.PushConsumer(f.mq.NameServer(), group, "bf-consumer-"+f.run, opts...)
	if err != nil {
		f.t.Fatal(err)
	}
	return pc
}

// applied reads the ledger: how often each key was applied.
func (f *fixture) applied() map[string]int {
	f.t.Helper()
	m, err := f.rdb.HGetAll(context.Background(), f.ledger()).Result()
	if err != nil {
		f.t.Fatal(err)
	}
	out := make(map[string]int, len(m))
	for k, v := range m {
		var n int
		fmt.Sscan(v, &n)
		out[k] = n
	}
	return out
}
