package grpcv5_test

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testenv"
)

// inChild runs t in a child process, against the test proxy and Redis,
// unless this is that child, and reports whether it is: the child
// tolerates the gRPC client's own data races (internal/racechild). The
// tests it runs so run in parallel with each other: each has a topic and
// a group of its own, and spends most of its time waiting on the proxy's
// timers (invisible durations, retry delays, rebalances).
func inChild(t *testing.T) bool {
	t.Helper()
	t.Parallel()
	ep := testenv.RocketMQ5(t)
	return racechild.Test(t, "IDEMQ_ROCKETMQ5_NAMESRV="+ep.NameServer, "IDEMQ_ROCKETMQ5_PROXY="+ep.Proxy,
		"IDEMQ_REDIS_ADDR="+testenv.Redis(t))
}

// oneSecond are the test group's retry delays: testenv creates groups with
// a customized retry policy of 1s per attempt.
var oneSecond = slices.Repeat([]time.Duration{time.Second}, 18)

// fixture is one end-to-end run: a RocketMQ 5 proxy, a topic and a group
// of its own (with retryMaxTimes as given), and a Redis dedupe store.
type fixture struct {
	t            *testing.T
	ep           testenv.RocketMQ5Endpoints
	run          string
	topic, group string
	store        *redisdedupe.Store
}

func newFixture(t *testing.T, name string, retryMaxTimes int) *fixture {
	t.Helper()
	ep := testenv.RocketMQ5(t)
	f := &fixture{t: t, ep: ep, run: fmt.Sprintf("%s-%d-%d", name, os.Getpid(), time.Now().UnixNano())}
	f.topic, f.group = "g5-"+f.run, "g5-group-"+f.run
	testenv.RocketMQ5Topic(t, f.topic, 4)
	testenv.RocketMQGroup(t, ep.NameServer, f.group, retryMaxTimes)
	rdb := redis.NewClient(&redis.Options{Addr: testenv.Redis(t)})
	t.Cleanup(func() { rdb.Close() })
	store, err := redisdedupe.New(rdb, redisdedupe.Config{Prefix: "g5:" + f.run + ":"})
	if err != nil {
		t.Fatal(err)
	}
	f.store = store
	return f
}

// patient builds the clients with 10 s request timeouts instead of 3 s:
// under a whole test suite's load a just started proxy may take longer to
// answer a route query.
func patient(c *golang.Config, opts ...golang.ClientOption) (golang.Client, error) {
	return golang.NewClient(c, append(opts, golang.WithQueryRouteTimeout(10*time.Second))...)
}

func (f *fixture) config(group string) *golang.Config {
	return &golang.Config{Endpoint: f.ep.Proxy, ConsumerGroup: group, Credentials: &credentials.SessionCredentials{}}
}

// consumer is a Consumer of the run's group, counting into its own Stats.
func (f *fixture) consumer(opts ...consumer.Option) *consumer.Consumer {
	f.t.Helper()
	opts = append([]consumer.Option{
		consumer.WithDelayLevels(oneSecond...),
		consumer.WithGuard(dedupe.GuardConfig{Retention: 10 * time.Minute}),
		consumer.WithLogger(slog.New(slog.NewTextHandler(f.t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))),
	}, opts...)
	c, err := consumer.New(f.store, f.group, opts...)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// simpleConsumer is a started SimpleConsumer of the run's group on its
// topic, stopped when the test ends.
func (f *fixture) simpleConsumer() golang.SimpleConsumer {
	f.t.Helper()
	sc, err := golang.NewSimpleConsumer(f.config(f.group),
		golang.WithClientFuncForSimpleConsumer(patient),
		golang.WithSimpleAwaitDuration(5*time.Second),
		golang.WithSimpleSubscriptionExpressions(map[string]*golang.FilterExpression{f.topic: golang.SUB_ALL}))
	if err != nil {
		f.t.Fatal(err)
	}
	if err := sc.Start(); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { sc.GracefulStop() })
	return sc
}

// producer is a started 5.x producer of the run's topic.
func (f *fixture) producer() golang.Producer {
	f.t.Helper()
	p, err := golang.NewProducer(f.config(""), golang.WithClientFunc(patient), golang.WithTopics(f.topic))
	if err != nil {
		f.t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { p.GracefulStop() })
	return p
}
