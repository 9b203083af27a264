package kafka_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	_ "modernc.org/sqlite"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/kafka"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/outbox"
)

// TestEndToEndTxKill runs the exactly-once SQL mode (Consumer.Tx) over
// MariaDB: each record's row and its key commit in one transaction, and
// its offset is committed after. A receiver is killed (SIGKILL) while it
// commits rows, and a second takes its partitions over: the table ends
// with exactly one row per record.
func TestEndToEndTxKill(t *testing.T) {
	t.Parallel()
	brokers := []string{testenv.Kafka(t)}
	dsn := testenv.MySQL(t)
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE effects (msg_key VARCHAR(255) NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	store, err := sqldedupe.New(db, dialect.MySQL, sqldedupe.Config{CleanupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	topic, group := unique("e2e-tx"), unique("e2e-tx-group")
	createTopic(t, brokers, topic, 4)
	e := newEffects()
	s := receiverSettings{Brokers: brokers, Topic: topic, Group: group, MySQL: dsn,
		Delay: 5 * time.Millisecond, Lease: 2 * time.Second}
	a, _ := startReceiver(t, e, "a", s)
	sent := sendKeys(t, producer(t, brokers), topic, 300)
	waitApplied(t, e, "a", 60)
	a.Kill(t)
	unfinished(t, e, sent)
	b, lines := startReceiver(t, e, "b", s)
	rows := func() (map[string]int, map[string]int) {
		return testkit.CountBy(t, db, "SELECT msg_key, COUNT(*) FROM effects GROUP BY msg_key"), nil
	}
	tl, _ := testkit.Settle(t, sent, rows, nil, 2*time.Minute, 2*time.Second)
	t.Logf("rows: %v", tl)
	tl.Check(t)
	t.Logf("b: %s", drainReceiver(t, b, lines))
}

// TestEndToEndOutboxRelay adds rows to a SQLite outbox in 10 ordering
// keys, ships them through a relay with the OutboxSender, and consumes
// them with a Receiver: each row is applied once, and each ordering key's
// rows in the order they were added (they share a partition).
func TestEndToEndOutboxRelay(t *testing.T) {
	t.Parallel()
	brokers := []string{testenv.Kafka(t)}
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "outbox.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(wal)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	ob, err := outbox.New(db, dialect.SQLite, testkit.Keys(t, 3), outbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	topic, group := unique("e2e-outbox"), unique("e2e-outbox-group")
	createTopic(t, brokers, topic, 4)
	s, err := kafka.NewOutboxSender(client(t, brokers))
	if err != nil {
		t.Fatal(err)
	}
	relay, err := outbox.NewRelay(ob, s, outbox.RelayConfig{Batch: 50})
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()

	var (
		mu      sync.Mutex
		applied = map[string]int{}
		order   = map[string][]string{} // ordering key → message keys applied
	)
	c, err := consumer.New(memdedupe.New(memdedupe.Config{}), group)
	if err != nil {
		t.Fatal(err)
	}
	r, err := kafka.NewReceiver(c, func(_ context.Context, m *consumer.Message) error {
		mu.Lock()
		defer mu.Unlock()
		k := msgkey.Of(m)
		applied[k]++
		ok := string(m.Raw.(*kgo.Record).Key)
		order[ok] = append(order[ok], k)
		return nil
	}, kafka.ReceiverConfig{}, kgo.SeedBrokers(brokers...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic))
	if err != nil {
		t.Fatal(err)
	}
	go r.Run(t.Context())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := r.Drain(ctx); err != nil {
			t.Error(err)
		}
	})

	var sent []string
	added := map[string][]string{}
	for batch := range 10 {
		msgs := make([]outbox.Message, 30)
		for i := range msgs {
			msgs[i] = outbox.Message{Topic: topic, Body: fmt.Appendf(nil, "row %d-%d", batch, i), OrderingKey: fmt.Sprintf("customer-%d", i%10)}
		}
		keys := testkit.AddCommitted(t, db, ob, msgs...)
		for i, k := range keys {
			added[msgs[i].OrderingKey] = append(added[msgs[i].OrderingKey], k)
		}
		sent = append(sent, keys...)
	}
	read := func() (map[string]int, map[string]int) {
		mu.Lock()
		defer mu.Unlock()
		n := make(map[string]int, len(applied))
		for k, v := range applied {
			n[k] = v
		}
		return n, nil
	}
	tl, _ := testkit.Settle(t, sent, read, nil, time.Minute, time.Second)
	t.Logf("%v", tl)
	tl.Check(t)
	mu.Lock()
	defer mu.Unlock()
	for ok, keys := range added {
		if !slices.Equal(order[ok], keys) {
			t.Errorf("%s: applied %v, want the order added %v", ok, order[ok], keys)
		}
	}
}
