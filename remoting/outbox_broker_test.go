package remoting_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/relaychild"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testenv/remotingread"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/outbox"
	"github.com/idemq/idemq/remoting"
)

// newSender starts a producer whose queue follows the sharding key and
// returns an OutboxSender over it, shut down when t ends.
func newSender(t *testing.T, ns, name string) *remoting.OutboxSender {
	t.Helper()
	s, stop, err := relaychild.StartSender(ns, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return s
}

// TestRelaysShipInOrder runs two relays over one PostgreSQL table into a
// real 4.x broker: every message arrives, with the key Add returned; each
// ordering key's messages sit in one queue in the order they were added;
// and a body the broker refuses is parked with its reason while the rows
// after it flow.
func TestRelaysShipInOrder(t *testing.T) {
	if !racechild.Test(t, "IDEMQ_ROCKETMQ_NAMESRV="+testenv.RocketMQ(t), "IDEMQ_POSTGRES_DSN="+testenv.Postgres(t)) {
		return
	}
	ns := testenv.RocketMQ(t)
	run := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	topic := "outbox-" + run
	got := remotingread.Topic(t, ns, topic, 4)

	b := testdb.Postgres
	dsn := b.DSN(t)
	open := func() (*outbox.Outbox, *sql.DB) {
		gen, err := idgen.New(1, idgen.Config{})
		if err != nil {
			t.Fatal(err)
		}
		db := b.OpenDSN(t, dsn)
		o, err := outbox.New(db, b.Dialect, msgkey.FromIDs(gen), outbox.Config{MaxBody: 8 << 20})
		if err != nil {
			t.Fatal(err)
		}
		return o, db
	}
	writer, db := open()
	if err := writer.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	const n, keys = 200, 8
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		k := fmt.Sprintf("order-%d", i%keys)
		msgs[i] = outbox.Message{Topic: topic, Tags: "created", OrderingKey: k, Body: fmt.Appendf(nil, "%s/%d", k, i/keys)}
	}
	poison := make([]byte, 4<<20+1) // over the broker's maxMessageSize, and incompressible
	rand.Read(poison)
	msgs[keys+1] = outbox.Message{Topic: topic, OrderingKey: msgs[keys+1].OrderingKey, Body: poison}

	added := testkit.AddCommitted(t, db, writer, msgs...)

	quiet := slog.New(slog.DiscardHandler)
	for i := range 2 {
		o, _ := open()
		r, err := outbox.NewRelay(o, newSender(t, ns, fmt.Sprintf("%s-relay%d", topic, i)), outbox.RelayConfig{Batch: 20, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
	}
	recv := got.Await(t, "every message but the poison", func(ms []*primitive.MessageExt) bool { return len(ms) >= n-1 })
	waitPending(t, writer)

	byKey := map[string]*primitive.MessageExt{}
	for _, m := range recv {
		byKey[msgkey.Of(m)] = m
	}
	for i, k := range added {
		m, ok := byKey[k]
		if i == keys+1 {
			if ok {
				t.Errorf("the poison row arrived")
			}
			continue
		}
		if !ok || string(m.Body) != string(msgs[i].Body) || !strings.Contains(" "+m.GetKeys()+" ", " "+k+" ") || m.GetTags() != "created" {
			t.Fatalf("message %d (key %s) arrived as %v", i, k, m)
		}
	}
	if len(recv) != n-1 {
		t.Errorf("received %d messages, want %d: a duplicate", len(recv), n-1)
	}
	// Order: each key's messages in one queue, offsets rising in body order.
	slices.SortFunc(recv, func(a, b *primitive.MessageExt) int { return int(a.QueueOffset - b.QueueOffset) })
	queue, next := map[string]int{}, map[string]int{}
	for _, m := range recv {
		k, i, _ := strings.Cut(string(m.Body), "/")
		if q, ok := queue[k]; ok && q != m.Queue.QueueId {
			t.Fatalf("%s in queues %d and %d", k, q, m.Queue.QueueId)
		}
		queue[k] = m.Queue.QueueId
		if k == msgs[keys+1].OrderingKey && next[k] == 1 {
			next[k]++ // the parked row
		}
		if want := fmt.Sprint(next[k]); i != want {
			t.Fatalf("%s/%s arrived when %s/%s was next", k, i, k, want)
		}
		next[k]++
	}
	st, err := writer.Count(t.Context())
	if err != nil || st.Parked != 1 || st.Sent != n-1 {
		t.Fatalf("stats %+v (%v): want 1 parked, %d sent", st, err, n-1)
	}
	var reason string
	if err := db.QueryRowContext(t.Context(), `SELECT last_error FROM idemq_outbox WHERE state = 2`).Scan(&reason); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(reason, "CODE: 13") {
		t.Errorf("parked with reason %q", reason)
	}
	t.Logf("%sshipped %d messages through two relays", racechild.Figure, n-1)
}

// TestBatchWithPoisonRow ships rows of three ordering keys and rows
// without one through a relay that sends batches to a real 4.x broker; one
// row of a key and one without carry a property over the broker's 32 KiB
// limit on a message's properties, small enough to share a batch. The
// broker refuses their batches whole; the relay sends those again row by
// row: only the two poison rows park, and every other row arrives once,
// each key's in order, in one queue.
func TestBatchWithPoisonRow(t *testing.T) {
	if !racechild.Test(t, "IDEMQ_ROCKETMQ_NAMESRV="+testenv.RocketMQ(t), "IDEMQ_MYSQL_DSN="+testenv.MySQL(t)) {
		return
	}
	ns := testenv.RocketMQ(t)
	run := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	topic := "outbox-batch-" + run
	got := remotingread.Topic(t, ns, topic, 4)

	b := testdb.MySQL
	db := b.Open(t)
	o := migrated(t, db, b.Dialect, 3)
	const n, keys = 120, 3
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		if i%4 == 3 { // a quarter without an ordering key
			msgs[i] = outbox.Message{Topic: topic, Body: fmt.Appendf(nil, "free/%d", i)}
			continue
		}
		k := fmt.Sprintf("order-%d", i%keys)
		msgs[i] = outbox.Message{Topic: topic, OrderingKey: k, Body: fmt.Appendf(nil, "%s/%d", k, i)}
	}
	big := map[string]string{"note": strings.Repeat("x", 40<<10)}
	poison := []int{31, 40} // order-1's, and one without a key
	for _, i := range poison {
		msgs[i].Properties = big
	}
	added := testkit.AddCommitted(t, db, o, msgs...)
	sender := &transientCounter{OutboxSender: newSender(t, ns, topic+"-relay")}
	r, err := outbox.NewRelay(o, sender, outbox.RelayConfig{Batch: 200, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	recv := got.Await(t, "every message but the poison", func(ms []*primitive.MessageExt) bool { return len(ms) >= n-len(poison) })
	waitPending(t, o)
	r.Close()

	want := map[string]string{}
	for i, k := range added {
		if !slices.Contains(poison, i) {
			want[k] = string(msgs[i].Body)
		}
	}
	if len(recv) != len(want) {
		t.Fatalf("received %d messages, want %d", len(recv), len(want))
	}
	seen := map[string]bool{}
	for _, m := range recv {
		if seen[msgkey.Of(m)] {
			t.Fatalf("%s arrived twice", m.Body)
		}
		seen[msgkey.Of(m)] = true
	}
	// Order: each key's bodies in rising row number, in one queue.
	slices.SortFunc(recv, func(a, b *primitive.MessageExt) int { return int(a.QueueOffset - b.QueueOffset) })
	queue, last := map[string]int{}, map[string]int{}
	for _, m := range recv {
		if msgkey.Of(m) == "" || want[msgkey.Of(m)] != string(m.Body) {
			t.Fatalf("received %q with key %q, not the row's", m.Body, msgkey.Of(m))
		}
		k, i, _ := strings.Cut(string(m.Body), "/")
		if k == "free" {
			continue
		}
		var row int
		fmt.Sscan(i, &row)
		if q, ok := queue[k]; ok && (q != m.Queue.QueueId || row <= last[k]) {
			t.Fatalf("%s after %s/%d, in queue %d after %d", m.Body, k, last[k], m.Queue.QueueId, q)
		}
		queue[k], last[k] = m.Queue.QueueId, row
	}
	st, err := o.Count(t.Context())
	if err != nil || st.Parked != int64(len(poison)) || st.Sent != int64(len(want)) {
		t.Fatalf("stats %+v (%v): want %d parked, %d sent", st, err, len(poison), len(want))
	}
	// A refused batch goes again row by row without counting as a retry;
	// only a send the broker failed otherwise (busy, on a loaded machine)
	// is retried.
	rs := r.Stats()
	if transient := sender.errs(); rs.Parked != int64(len(poison)) || rs.Retried != 0 && len(transient) == 0 {
		t.Errorf("relay stats %+v, after sends that failed other than refused: %q", rs, transient)
	}
	// Parked by the broker's answer to each alone.
	rows, err := db.QueryContext(t.Context(), `SELECT last_error FROM idemq_outbox WHERE state = 2`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var reason string
		if err := rows.Scan(&reason); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(reason, "CODE: 13") {
			t.Errorf("parked with reason %q", reason)
		}
	}
	t.Logf("%sshipped %d messages in batches, parked %d", racechild.Figure, len(want), len(poison))
}

// checkShipped checks that every message of recv carries the key and body
// of a row (want: body by key), and that each ordering key's rows, bodies
// "<ordering key>/<n>", first arrived in the order they were added (n = 0,
// 1, …), a key's rows going to one queue.
func checkShipped(t *testing.T, recv []*primitive.MessageExt, want map[string]string) {
	t.Helper()
	for _, m := range recv {
		if body, ok := want[msgkey.Of(m)]; !ok || body != string(m.Body) {
			t.Fatalf("received %q with key %q, not the row's", m.Body, msgkey.Of(m))
		}
	}
	// Each key's first copies, in queue order, follow the order of Add.
	recv = slices.Clone(recv)
	slices.SortFunc(recv, func(a, b *primitive.MessageExt) int { return int(a.QueueOffset - b.QueueOffset) })
	first, next := map[string]bool{}, map[string]int{}
	for _, m := range recv {
		if first[string(m.Body)] {
			continue
		}
		first[string(m.Body)] = true
		k, i, _ := strings.Cut(string(m.Body), "/")
		if want := fmt.Sprint(next[k]); i != want {
			t.Fatalf("%s/%s first arrived when %s/%s was next", k, i, k, want)
		}
		next[k]++
	}
}

// waitPending waits until o has no pending row.
func waitPending(t *testing.T, o *outbox.Outbox) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := o.Count(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if st.Pending == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rows still pending: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// transientCounter is an OutboxSender that notes the errors of its sends
// other than refusals: the sends a relay retries.
type transientCounter struct {
	*remoting.OutboxSender
	mu        sync.Mutex
	transient []string
}

func (c *transientCounter) Send(ctx context.Context, m *outbox.Message) error {
	return c.note(c.OutboxSender.Send(ctx, m))
}

func (c *transientCounter) SendBatch(ctx context.Context, msgs []*outbox.Message) error {
	return c.note(c.OutboxSender.SendBatch(ctx, msgs))
}

func (c *transientCounter) note(err error) error {
	if err != nil && !errors.Is(err, outbox.ErrRefused) {
		c.mu.Lock()
		c.transient = append(c.transient, err.Error())
		c.mu.Unlock()
	}
	return err
}

func (c *transientCounter) errs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.transient)
}
