package remoting_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testenv"
)

// broker is a RocketMQ server as the remoting client sees it: a name
// server, how to create a topic on it, and the variables that name it to
// a child process.
type broker struct {
	name       string
	nameServer func(testing.TB) string
	topic      func(tb testing.TB, topic string, queues int)
	env        func(testing.TB) []string
}

var (
	broker4 = broker{"4.x", testenv.RocketMQ, testenv.RocketMQTopic,
		func(tb testing.TB) []string { return []string{"IDEMQ_ROCKETMQ_NAMESRV=" + testenv.RocketMQ(tb)} }}
	broker5 = broker{"5.x", func(tb testing.TB) string { return testenv.RocketMQ5(tb).NameServer }, testenv.RocketMQ5Topic,
		func(tb testing.TB) []string {
			ep := testenv.RocketMQ5(tb)
			return []string{"IDEMQ_ROCKETMQ5_NAMESRV=" + ep.NameServer, "IDEMQ_ROCKETMQ5_PROXY=" + ep.Proxy}
		}}
)

// inChild runs t in a child process, against b, the test Redis and env,
// unless this is that child, and reports whether it is: the child
// tolerates the remoting client's own data races, such as its Shutdown
// against a rebalance (internal/racechild), and fails on any other. Every
// test that starts and shuts down a client runs so; its log lines are
// racechild.Figure lines.
func inChild(t *testing.T, b broker, env ...string) bool {
	t.Helper()
	return racechild.Test(t, append(append(b.env(t), "IDEMQ_REDIS_ADDR="+testenv.Redis(t)), env...)...)
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
