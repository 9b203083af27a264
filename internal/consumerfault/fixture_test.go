package consumerfault

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	rmqproducer "github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testenv/remotingread"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/remoting"
)

// brokerLevels are the test broker's delay levels (internal/testenv): 18
// levels of 1s each.
var brokerLevels = slices.Repeat([]time.Duration{time.Second}, 18)

// retention keeps the dedupe records of a run long enough for the test and
// no longer: the Redis may be shared.
const retention = 10 * time.Minute

// fixture is what one scenario shares: the servers, a run name that keeps
// its topics, groups, client instances and Redis keys apart from every
// other run's, and a Redis client.
type fixture struct {
	t         *testing.T
	ns        string
	redisAddr string
	run       string
	rdb       *redis.Client
	// createTopic creates a topic on the broker of ns.
	createTopic func(tb testing.TB, topic string, queues int)
}

// inChild runs t in a child process against the test Redis and env (the
// broker's variables), unless this is that child, and reports whether it
// is: the remoting clients a test starts and shuts down in its own process
// (the producer, the dead-letter watcher, a taker) race with themselves,
// which the child tolerates (internal/racechild), and with nothing else. A
// test's log lines are racechild.Figure lines.
func inChild(t *testing.T, env ...string) bool {
	t.Helper()
	return racechild.Test(t, append(env, "IDEMQ_REDIS_ADDR="+testenv.Redis(t))...)
}

// rocketmq4 names the 4.x test broker to a child process.
func rocketmq4(t *testing.T) []string {
	return []string{"IDEMQ_ROCKETMQ_NAMESRV=" + testenv.RocketMQ(t)}
}

// rocketmq5 names the 5.x test broker and proxy to a child process.
func rocketmq5(t *testing.T) []string {
	ep := testenv.RocketMQ5(t)
	return []string{"IDEMQ_ROCKETMQ5_NAMESRV=" + ep.NameServer, "IDEMQ_ROCKETMQ5_PROXY=" + ep.Proxy}
}

func newFixture(t *testing.T, name string) *fixture {
	t.Helper()
	return fixtureOn(t, name, testenv.RocketMQ(t), testenv.RocketMQTopic)
}

// fixtureOn is a fixture on the name server ns, whose topics createTopic
// creates.
func fixtureOn(t *testing.T, name, ns string, createTopic func(testing.TB, string, int)) *fixture {
	t.Helper()
	f := &fixture{
		t:           t,
		ns:          ns,
		redisAddr:   testenv.Redis(t),
		run:         fmt.Sprintf("%s-%d-%d", name, os.Getpid(), time.Now().UnixNano()),
		createTopic: createTopic,
	}
	f.rdb = redis.NewClient(&redis.Options{Addr: f.redisAddr})
	t.Cleanup(func() {
		// The dedupe records expire after retention; the ledger would not.
		f.rdb.Del(context.Background(), f.ledger())
		f.rdb.Close()
	})
	return f
}

// topic creates the run's topic with queues queues.
func (f *fixture) topic(queues int) string {
	f.t.Helper()
	topic := "cf-" + f.run
	f.createTopic(f.t, topic, queues)
	return topic
}

// group names the run's consumer group and creates its retry topic, which
// a consumer otherwise learns of only at its 30 s route refresh, and its
// dead-letter topic, readable (the broker would create it write-only), so
// that [fixture.watchDLQ] can consume it.
func (f *fixture) group() string {
	f.t.Helper()
	group := "cf-group-" + f.run
	f.createTopic(f.t, "%RETRY%"+group, 1)
	f.createTopic(f.t, "%DLQ%"+group, 1)
	return group
}

// ledger is the Redis hash the run's handlers count each applied key in.
func (f *fixture) ledger() string { return "cf:" + f.run + ":ledger" }

// storePrefix starts the run's dedupe records.
func (f *fixture) storePrefix() string { return "cf:" + f.run + ":dedupe:" }

// producer returns a started producer that stamps keys; it is shut down
// when the test ends.
func (f *fixture) producer() *remoting.Producer {
	f.t.Helper()
	rp, err := rocketmq.NewProducer(
		rmqproducer.WithNsResolver(primitive.NewPassthroughResolver([]string{f.ns})),
		rmqproducer.WithGroupName("cf-producer-"+f.run),
		rmqproducer.WithInstanceName("cf-producer-"+f.run),
	)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := rp.Start(); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { rp.Shutdown() })
	p, err := remoting.NewProducer(rp, testkit.Keys(f.t, 1))
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

// send sends body to topic and returns the message's key.
func send(ctx context.Context, p *remoting.Producer, topic string, body []byte) (string, error) {
	m := primitive.NewMessage(topic, body)
	if _, err := p.SendSync(ctx, m); err != nil {
		return "", err
	}
	return msgkey.Of(m), nil
}

// sendAll sends n messages to topic through p, the i-th with body(i), and
// returns their keys.
func sendAll(t *testing.T, p *remoting.Producer, topic string, n int, body func(i int) []byte) []string {
	t.Helper()
	var sent []string
	for i := range n {
		key, err := send(t.Context(), p, topic, body(i))
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, key)
	}
	return sent
}

// awaitHeld reads the holder's lines until it holds n keys and returns
// the reconsume count (4.x) or attempt (5.x) each is held on; a lease
// lost, or the holder's exit, fails t.
func awaitHeld(t *testing.T, holder *racechild.Proc, n int, timeout time.Duration) map[string]int {
	t.Helper()
	held := map[string]int{}
	for len(held) < n {
		l, ok := holder.Next(t, timeout)
		if !ok {
			t.Fatalf("holder exited holding %d of %d keys", len(held), n)
		}
		var key string
		var on int
		switch {
		case strings.HasPrefix(l, "lost "):
			t.Fatalf("holder %s", l)
		case strings.HasPrefix(l, "hold "):
			if _, err := fmt.Sscanf(l, "hold %s %d", &key, &on); err != nil {
				t.Fatalf("holder said %q: %v", l, err)
			}
			held[key] = on
		}
	}
	return held
}

// drainer returns a function that drains c and pc, an idle consumer of
// this process, within 5 s, once; the test's end calls it unless the test
// did.
func drainer(t *testing.T, c *consumer.Consumer, pc rocketmq.PushConsumer) func() error {
	var (
		once sync.Once
		err  error
	)
	drain := func() error {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err = remoting.Drain(ctx, c, pc)
		})
		return err
	}
	t.Cleanup(func() { drain() })
	return drain
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

// apply is the effect every handler of these tests applies: it counts key
// in the ledger.
func apply(ctx context.Context, rdb *redis.Client, ledger, key string) error {
	return rdb.HIncrBy(ctx, ledger, key, 1).Err()
}

// newStore is the Redis dedupe store of a run.
func newStore(rdb *redis.Client, prefix string) (*redisdedupe.Store, error) {
	return redisdedupe.New(rdb, redisdedupe.Config{Prefix: prefix})
}

// guardConfig is the guard of every consumer of these tests: a lease of
// lease, renewed every third of it.
func guardConfig(lease time.Duration) dedupe.GuardConfig {
	return dedupe.GuardConfig{Lease: lease, Retention: retention}
}

// watchDLQ consumes group's dead-letter topic, from its start, in a group
// of its own for the rest of the test.
func (f *fixture) watchDLQ(group string) *remotingread.DeadLetters {
	f.t.Helper()
	return remotingread.WatchDeadLetters(f.t, f.ns, group, "cf-dlq-"+f.run)
}

// settle waits for sent as testkit.Settle does, counting the ledger's
// keys applied and dlq's dead-lettered.
func (f *fixture) settle(sent []string, dlq *remotingread.DeadLetters, idle func() bool, timeout, quiet time.Duration) testkit.Tally {
	f.t.Helper()
	tl, _ := testkit.Settle(f.t, sent, func() (map[string]int, map[string]int) { return f.applied(), dlq.Keys() }, idle, timeout, quiet)
	return tl
}
