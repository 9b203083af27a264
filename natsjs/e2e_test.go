package natsjs_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/natsjs"
	"github.com/idemq/idemq/outbox"
)

// TestExactlyOnceSQL runs two worker processes in the exactly-once mode
// (consumer.Tx on a SQLite database that holds both the dedupe records
// and the effects) and kills one with SIGKILL mid-stream: its open
// transactions roll back with their keys, its messages come back after
// the AckWait, and every key is applied exactly once: none lost, none
// doubled.
func TestExactlyOnceSQL(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "effects.db")
	db, err := openSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	store, err := sqldedupe.New(db, dialect.SQLite, sqldedupe.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	store.Close()
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE effects (k TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	r := newFaultRun(t, testenv.NATS(t), 300, 4, workerSettings{SQLite: path, Workers: 2, BatchSize: 1, Hold: 2 * time.Millisecond})
	r.db = db
	a, b := r.start("worker a"), r.start("worker b")
	r.waitApplied(80)
	a.Kill(t)
	r.settle(0)
	t.Logf("figure: survivor %s", r.stop(b))
}

// TestOutboxRelay ships outbox rows (SQLite) through a relay with the
// OutboxSender to a stream, with four ordering keys, and consumes them:
// the stream stores each row once, each ordering key's rows in the order
// they were added; rows sent again, as a relay does after a crash, are
// dropped by the duplicate window; and the consumer applies each once.
func TestOutboxRelay(t *testing.T) {
	t.Parallel()
	url := testenv.NATS(t)
	db, err := openSQLite(filepath.Join(t.TempDir(), "outbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ob, err := outbox.New(db, dialect.SQLite, testkit.Keys(t, 23), outbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Outbox topics hold no dots (see package outbox): the stream's
	// subject is one token.
	f := newFixture(t, url, jetstream.ConsumerConfig{AckWait: 2 * time.Second, MaxDeliver: 5})
	subject := "idemq_outbox_" + f.stream
	if _, err := f.js.UpdateStream(t.Context(), jetstream.StreamConfig{Name: f.stream, Subjects: []string{f.subject, subject}}); err != nil {
		t.Fatal(err)
	}
	const n, orderings = 200, 4
	var rows []outbox.Message
	for i := range n {
		rows = append(rows, outbox.Message{Topic: subject, Body: fmt.Appendf(nil, "k%d:%d", i%orderings, i), OrderingKey: fmt.Sprintf("k%d", i%orderings)})
	}
	var keys []string
	for chunk := range slices.Chunk(rows, 25) {
		keys = append(keys, testkit.AddCommitted(t, db, ob, chunk...)...)
	}
	s, err := natsjs.NewOutboxSender(f.js)
	if err != nil {
		t.Fatal(err)
	}
	relay, err := outbox.NewRelay(ob, s, outbox.RelayConfig{})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := f.js.Stream(t.Context(), f.stream)
	if err != nil {
		t.Fatal(err)
	}
	stored := func() uint64 {
		info, err := stream.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	testkit.WaitFor(t, "every row stored", func() bool { return stored() >= n })
	if err := relay.Close(); err != nil {
		t.Fatal(err)
	}
	// A relay that died between a publish and marking its row sent
	// ships the row again, with the same key.
	for _, k := range keys[:20] {
		m := &outbox.Message{Topic: subject, Body: []byte("again"), Properties: map[string]string{msgkey.Property: k}}
		if err := s.Send(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	if got := stored(); got != n {
		t.Errorf("stream holds %d messages, want %d: the resends were not dropped", got, n)
	}
	last := map[string]int{}
	for seq := uint64(1); seq <= n; seq++ {
		m, err := stream.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		if k := m.Header.Get(msgkey.Property); k == "" || m.Header.Get(jetstream.MsgIDHeader) != k {
			t.Errorf("seq %d: key %q, message id %q", seq, k, m.Header.Get(jetstream.MsgIDHeader))
		}
		ok, i, _ := strings.Cut(string(m.Data), ":")
		idx, _ := strconv.Atoi(i)
		if prev, seen := last[ok]; seen && idx < prev {
			t.Errorf("ordering key %s: row %d stored after row %d", ok, idx, prev)
		}
		last[ok] = idx
	}

	var mu sync.Mutex
	applied := map[string]int{}
	c, err := consumer.New(memdedupe.New(memdedupe.Config{}), f.durable, consumer.WithMaxReconsumeTimes(4))
	if err != nil {
		t.Fatal(err)
	}
	pull, err := natsjs.Pull(c, f.consumer(t), func(_ context.Context, m *consumer.Message) error {
		mu.Lock()
		defer mu.Unlock()
		applied[msgkey.Of(m)]++
		return nil
	}, natsjs.PullConfig{PollWait: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- pull.Run(context.Background()) }()
	testkit.WaitFor(t, "every row applied", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(applied) >= n
	})
	if err := pull.Close(); err != nil {
		t.Error(err)
	}
	<-done
	mu.Lock()
	defer mu.Unlock()
	testkit.Count(keys, applied, nil).Check(t)
}
