package kafka_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/kafka"
	"github.com/idemq/idemq/msgkey"
)

// receiverSettings are what a "receiver" child runs.
type receiverSettings struct {
	Brokers      []string
	Topic, Group string
	// Redis is the dedupe store's address; MySQL, if set, is a DSN whose
	// database holds the store and the effects (the Tx mode) instead.
	Redis, MySQL string
	// Delay is how long the handler takes per record.
	Delay time.Duration
	// Fail is how many first attempts of one key in five fail, and of one
	// key in seven panic (one).
	Fail int32
	// Lease is the dedupe lease: how soon a killed holder's keys come free.
	Lease time.Duration
	// Retry, if set, is the delay before every retry (the Consumer's one
	// delay level).
	Retry time.Duration
}

// receiverChild consumes as its settings say. Each effect is a line it
// says, "applied <key>" (in the Tx mode, the row is the effect, and the
// line follows the commit); once told to stop (its standard input
// closed) it drains, says "drained <error>" and exits.
func receiverChild() error {
	var s receiverSettings
	if err := racechild.Settings(&s); err != nil {
		return err
	}
	var (
		store dedupe.Store
		db    *sql.DB
	)
	if s.MySQL != "" {
		var err error
		if db, err = sql.Open("mysql", s.MySQL); err != nil {
			return err
		}
		defer db.Close()
		ss, err := sqldedupe.New(db, dialect.MySQL, sqldedupe.Config{})
		if err != nil {
			return err
		}
		defer ss.Close()
		store = ss
	} else {
		rdb := redis.NewClient(&redis.Options{Addr: s.Redis, MaxRetries: -1})
		defer rdb.Close()
		rs, err := redisdedupe.New(rdb, redisdedupe.Config{})
		if err != nil {
			return err
		}
		store = rs
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts := []consumer.Option{consumer.WithLogger(logger),
		consumer.WithGuard(dedupe.GuardConfig{Lease: s.Lease}), consumer.WithStoreDownWait(time.Second)}
	if s.Retry > 0 {
		opts = append(opts, consumer.WithDelayLevels(s.Retry))
	}
	c, err := consumer.New(store, s.Group, opts...)
	if err != nil {
		return err
	}
	h := func(ctx context.Context, m *consumer.Message) error {
		time.Sleep(s.Delay)
		key := msgkey.Of(m)
		if m.Reconsumed < s.Fail && bucket(key, 5) == 0 {
			return errors.New("fault: failing on purpose")
		}
		if m.Reconsumed == 0 && s.Fail > 0 && bucket(key, 7) == 0 {
			panic("fault: panicking on purpose")
		}
		racechild.Say("applied %s", key)
		return nil
	}
	if db != nil {
		tx, err := c.Tx(func(ctx context.Context, tx *sql.Tx, m *consumer.Message) error {
			time.Sleep(s.Delay)
			_, err := tx.ExecContext(ctx, "INSERT INTO effects (msg_key) VALUES (?)", msgkey.Of(m))
			return err
		})
		if err != nil {
			return err
		}
		h = func(ctx context.Context, m *consumer.Message) error {
			if err := tx(ctx, m); err != nil {
				return err
			}
			racechild.Say("applied %s", msgkey.Of(m))
			return nil
		}
	}
	r, err := kafka.NewReceiver(c, h, kafka.ReceiverConfig{},
		kgo.SeedBrokers(s.Brokers...), kgo.ConsumerGroup(s.Group), kgo.ConsumeTopics(s.Topic),
		// The broker's least session (group.min.session.timeout.ms): a
		// killed member's partitions move 6 s later.
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(time.Second),
		kgo.FetchMaxWait(500*time.Millisecond), kgo.WithLogger(kafka.NewLogger(logger)))
	if err != nil {
		return err
	}
	ran := make(chan error, 1)
	go func() { ran <- r.Run(context.Background()) }()
	racechild.Say("started")
	// "mark" is a barrier: every "applied" said before it was told comes
	// before "marked" on the way to the parent.
	for line := range racechild.Told() {
		if line == "mark" {
			racechild.Say("marked")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = r.Drain(ctx)
	if rerr := <-ran; !errors.Is(rerr, err) && rerr != err {
		return fmt.Errorf("Run returned %v, Drain %v", rerr, err)
	}
	st := c.Stats()
	racechild.Say("drained %v failed=%d suppressed=%d", err, st.Failed, st.Suppressed)
	return nil
}

// bucket is key's hash modulo n.
func bucket(key string, n uint32) uint32 {
	h := fnv.New32a()
	h.Write([]byte(key))
	return h.Sum32() % n
}

// effects counts the "applied" lines of the receiver children a test
// follows.
type effects struct {
	mu      sync.Mutex
	applied map[string]int
	by      map[string]map[string]int // child → key → times
}

func newEffects() *effects {
	return &effects{applied: map[string]int{}, by: map[string]map[string]int{}}
}

// follow reads p's lines until the test ends, counting its effects; other
// lines go to lines, if not nil.
func (e *effects) follow(t *testing.T, p *racechild.Proc, lines chan<- string) {
	e.mu.Lock()
	e.by[p.Name()] = map[string]int{}
	e.mu.Unlock()
	go func() {
		for t.Context().Err() == nil {
			l, ok := p.Said()
			if !ok {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			if key, ok := strings.CutPrefix(l, "applied "); ok {
				e.mu.Lock()
				e.applied[key]++
				e.by[p.Name()][key]++
				e.mu.Unlock()
			} else if lines != nil {
				lines <- l
			}
		}
	}()
}

// count returns how often each key was applied so far.
func (e *effects) count() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := make(map[string]int, len(e.applied))
	for k, v := range e.applied {
		n[k] = v
	}
	return n
}

// total is how many effects were applied.
func (e *effects) total() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, v := range e.applied {
		n += v
	}
	return n
}

// startReceiver starts a receiver child, followed by e, and waits until it
// has started.
func startReceiver(t *testing.T, e *effects, name string, s receiverSettings) (*racechild.Proc, <-chan string) {
	t.Helper()
	p := racechild.Start(t, "receiver", name, s)
	lines := make(chan string, 16)
	e.follow(t, p, lines)
	select {
	case l := <-lines:
		if l != "started" {
			t.Fatalf("%s said %q first", name, l)
		}
	case <-time.After(time.Minute):
		t.Fatalf("%s did not start: %s", name, p.Stderr())
	}
	return p, lines
}

// drainReceiver stops p, which drains, and checks what it said.
func drainReceiver(t *testing.T, p *racechild.Proc, lines <-chan string) string {
	t.Helper()
	p.Stop()
	select {
	case l := <-lines:
		if !strings.HasPrefix(l, "drained <nil>") {
			t.Errorf("%s: %s", p.Name(), l)
		}
		p.Wait(t, time.Minute, nil)
		return l
	case <-time.After(time.Minute):
		t.Fatalf("%s did not drain: %s", p.Name(), p.Stderr())
	}
	return ""
}

// sendKeys produces n records of fresh keys to topic, each key its
// record's Key, and returns the keys.
func sendKeys(t *testing.T, p *kafka.Producer, topic string, n int) []string {
	t.Helper()
	keys := make([]string, n)
	rs := make([]*kgo.Record, n)
	for i := range keys {
		keys[i] = unique("k")
		rs[i] = &kgo.Record{Topic: topic, Key: []byte(keys[i]), Value: []byte("v " + keys[i]),
			Headers: []kgo.RecordHeader{{Key: msgkey.Property, Value: []byte(keys[i])}}}
	}
	if _, err := p.ProduceSync(t.Context(), rs...); err != nil {
		t.Fatal(err)
	}
	return keys
}

// producer is a Producer to brokers.
func producer(t *testing.T, brokers []string) *kafka.Producer {
	t.Helper()
	p, err := kafka.NewProducer(client(t, brokers), testkit.Keys(t, 2))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// settle waits until every key of sent is applied, then a quiet 2 s, and
// returns the tally.
func settle(t *testing.T, e *effects, sent []string, timeout time.Duration) testkit.Tally {
	t.Helper()
	tl, _ := testkit.Settle(t, sent, func() (map[string]int, map[string]int) { return e.count(), nil }, nil, timeout, 2*time.Second)
	return tl
}

// doubledAtMost fails t unless tl lost nothing, and doubled at most n keys.
func doubledAtMost(t *testing.T, tl testkit.Tally, n int) {
	t.Helper()
	t.Logf("%v", tl)
	if len(tl.Lost) > 0 || len(tl.Extra) > 0 || len(tl.Doubled) > n {
		t.Errorf("%v; want nothing lost and at most %d doubled (lost %s; doubled %s)", tl, n,
			testkit.JoinMax(tl.Lost, 10), testkit.JoinMax(tl.Doubled, 10))
	}
}
