package remoting_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"testing"
	"time"

	rmqconsumer "github.com/apache/rocketmq-client-go/v2/consumer"
	"go.opentelemetry.io/otel"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testenv/remotingread"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/outbox"
	"github.com/idemq/idemq/remoting"
)

// TestChainAppliesOnce runs a chain of three services on the real broker,
// each with a MariaDB database of its own: A writes orders with the
// outbox; B consumes them in the transactional mode and emits a payment
// request for each with Outbox.Emit; C applies the payments in its
// transactional mode. Then B is forced to run again for some orders: their
// records are forgotten and the orders sent again, with their keys. B's
// copies carry the keys of the first run, and C applies every payment
// once. The trace runs from A's transaction to C's effect: each order's
// span is the parent of B's span of it, and B's handler span the parent of
// C's span of the payment it emitted.
func TestChainAppliesOnce(t *testing.T) {
	if !racechild.Test(t, "IDEMQ_ROCKETMQ_NAMESRV="+testenv.RocketMQ(t), "IDEMQ_MYSQL_DSN="+testenv.MySQL(t)) {
		return
	}
	const (
		orders = 200
		again  = 50 // orders B runs again
	)
	ctx := t.Context()
	ns := testenv.RocketMQ(t)
	run := fmt.Sprint(time.Now().UnixNano())
	otel.SetTextMapPropagator(propagation.TraceContext{})
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	// The relays' senders trace through the global provider.
	oldTP := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(oldTP) })
	ordersTopic, paymentsTopic := "chain-orders-"+run, "chain-payments-"+run
	for _, topic := range []string{ordersTopic, paymentsTopic} {
		testenv.RocketMQTopic(t, topic, 4)
	}

	// A: the orders, written with the outbox.
	dbA := testdb.MySQL.Open(t)
	outA, err := outbox.New(dbA, dialect.MySQL, testkit.Keys(t, 1), outbox.Config{TraceContext: injectTrace})
	if err != nil {
		t.Fatal(err)
	}
	if err := outA.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	relay(t, outA, newSender(t, ns, "chain-a-"+run))
	var (
		sent    []string            // the orders' keys
		ordered []trace.SpanContext // the spans of A's transactions
	)
	for i := range orders {
		octx, span := tp.Tracer("service-a").Start(ctx, "place order")
		sent = append(sent, addOrder(octx, t, dbA, outA, ordersTopic, "", i))
		ordered = append(ordered, span.SpanContext())
		span.End()
	}

	// B: consumes orders, emits payment requests.
	dbB := testdb.MySQL.Open(t)
	storeB := migratedStore(t, dbB)
	outB, err := outbox.New(dbB, dialect.MySQL, nil, outbox.Config{TraceContext: injectTrace})
	if err != nil {
		t.Fatal(err)
	}
	if err := outB.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	relay(t, outB, newSender(t, ns, "chain-b-"+run))
	groupB := "chain-b-" + run
	b := chainService(t, ns, ordersTopic, groupB, storeB, tp, func(ctx context.Context, _ *sql.Tx, m *consumer.Message) error {
		_, err := outB.Emit(ctx, "payment", outbox.Message{Topic: paymentsTopic, Body: []byte("charge " + msgkey.Of(m))})
		return err
	})

	// C: applies payments.
	dbC := testdb.MySQL.Open(t)
	if _, err := dbC.ExecContext(ctx, "CREATE TABLE payments (k VARCHAR(255) NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	c := chainService(t, ns, paymentsTopic, "chain-c-"+run, migratedStore(t, dbC), tp, func(ctx context.Context, tx *sql.Tx, m *consumer.Message) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO payments (k) VALUES (?)", msgkey.Of(m))
		return err
	})

	want := map[string]bool{}
	for _, k := range sent {
		d, err := msgkey.Derive(k, groupB, "payment")
		if err != nil {
			t.Fatal(err)
		}
		want[d] = true
	}
	applied := func() map[string]int { return testkit.CountBy(t, dbC, "SELECT k, COUNT(*) FROM payments GROUP BY k") }
	testkit.WaitFor(t, "C applying every order's payment", func() bool { return len(applied()) == orders })
	// The spans end just after the effects they trace commit.
	testkit.WaitFor(t, "B's and C's spans of every order", func() bool {
		return consumerSpans(spans.Ended(), ordersTopic) >= orders && consumerSpans(spans.Ended(), paymentsTopic) >= orders
	})
	traced := checkTrace(t, spans.Ended(), ordered, paymentsTopic)
	relayed := checkRelayed(t, spans.Ended(), ordered, ordersTopic, paymentsTopic)

	// B runs again for some orders: an operator forgets their records, and
	// the orders come again (a producer's retry, with their keys).
	for _, k := range sent[:again] {
		if ok, err := storeB.Forget(ctx, dedupe.Ref{Group: groupB, Key: k}); !ok || err != nil {
			t.Fatalf("Forget %s = %v, %v", k, ok, err)
		}
	}
	for i, k := range sent[:again] {
		addOrder(ctx, t, dbA, outA, ordersTopic, k, i)
	}
	testkit.WaitFor(t, "B running again and C suppressing the copies", func() bool {
		return b.Stats().Completed >= orders+again && c.Stats().Suppressed >= again
	})

	lost, doubled, strays := 0, 0, 0
	got := applied()
	for k := range want {
		switch got[k] {
		case 0:
			lost++
		case 1:
		default:
			doubled++
		}
	}
	for k := range got {
		if !want[k] {
			strays++
		}
	}
	// Every copy of one payment request carries one key: B's rows per key.
	rows := testkit.OutboxKeys(t, outB, 2*orders)
	copies := 0
	for k, n := range rows {
		if !want[k] {
			t.Errorf("B emitted key %s, derived from no order", k)
		}
		copies += n
	}
	if lost != 0 || doubled != 0 || strays != 0 {
		t.Errorf("C applied %d payments: %d lost, %d doubled, %d not derived from an order", len(got), lost, doubled, strays)
	}
	if len(rows) != orders || copies != orders+again {
		t.Errorf("B's outbox holds %d rows under %d keys, want %d rows under the %d orders' keys", copies, len(rows), orders+again, orders)
	}
	t.Logf("%sorders %d, run again %d: B emitted %d rows under %d keys; C delivered %d, applied %d once each (lost %d, doubled %d), suppressed %d; %d traces from A's transaction to C's effect, %d rows' relay spans in them",
		racechild.Figure, orders, again, copies, len(rows), c.Stats().Delivered, len(got), lost, doubled, c.Stats().Suppressed, traced, relayed)
}

// addOrder writes order i into A's outbox in a transaction of its own,
// under ctx's span, with key when it is not "" (a resend), and returns its
// key.
func addOrder(ctx context.Context, t *testing.T, db *sql.DB, o *outbox.Outbox, topic, key string, i int) string {
	t.Helper()
	m := outbox.Message{Topic: topic, Body: fmt.Appendf(nil, "order %d", i)}
	if key != "" {
		m.Properties = map[string]string{msgkey.Property: key}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	k, err := o.Add(ctx, tx, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return k
}

// migratedStore returns a sqldedupe store over db, its table made.
func migratedStore(t *testing.T, db *sql.DB) *sqldedupe.Store {
	t.Helper()
	s, err := sqldedupe.New(db, dialect.MySQL, sqldedupe.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s
}

// relay ships o's rows with s until t ends.
func relay(t *testing.T, o *outbox.Outbox, s outbox.Sender) {
	t.Helper()
	r, err := outbox.NewRelay(o, s, outbox.RelayConfig{PollInterval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
}

// chainService consumes topic in group with a transactional handler over
// store, tracing with tp, until t ends, and returns its Consumer.
func chainService(t *testing.T, ns, topic, group string, store *sqldedupe.Store, tp trace.TracerProvider, h func(context.Context, *sql.Tx, *consumer.Message) error) *consumer.Consumer {
	t.Helper()
	c, err := consumer.New(store, group, consumer.WithLogger(slog.New(slog.DiscardHandler)), consumer.WithTelemetry(metricnoop.NewMeterProvider(), tp))
	if err != nil {
		t.Fatal(err)
	}
	txh, err := c.Tx(h)
	if err != nil {
		t.Fatal(err)
	}
	consumeFromFirst(t, ns, topic, group, c, txh)
	return c
}

// consumeFromFirst consumes topic from its first offset with a push
// consumer of group, c's, that runs h through c, until t ends, when it
// drains.
func consumeFromFirst(t *testing.T, ns, topic, group string, c *consumer.Consumer, h consumer.Handler) {
	t.Helper()
	// The retry topic exists before the consumer starts, which otherwise
	// learns of it only at its 30 s route refresh.
	if err := testenv.CreateRocketMQTopic(t.Context(), ns, "%RETRY%"+group, 1); err != nil {
		t.Fatal(err)
	}
	pc, err := remotingread.PushConsumer(ns, group, group)
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.Subscribe(topic, rmqconsumer.MessageSelector{}, remoting.Concurrently(c, h)); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		remoting.Drain(ctx, c, pc)
	})
}

// checkTrace checks the spans of the chain's first run: each order's
// consumer span at B is a child of A's span of it (ordered), and each
// payment's at C a child of the handler span at B that emitted it, in the
// order's trace. It returns the traces that run from A to C.
func checkTrace(t *testing.T, ended []sdktrace.ReadOnlySpan, ordered []trace.SpanContext, paymentsTopic string) int {
	t.Helper()
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range ended {
		byID[s.SpanContext().SpanID()] = s
	}
	orderOf := map[trace.SpanID]bool{} // A's spans
	for _, sc := range ordered {
		orderOf[sc.SpanID()] = true
	}
	traced := 0
	for _, s := range ended {
		if s.SpanKind() != trace.SpanKindConsumer || s.Name() != "process "+paymentsTopic {
			continue
		}
		// C's span, child of B's handler span, child of B's process span,
		// child of A's.
		handler, ok := byID[s.Parent().SpanID()]
		if !ok || handler.Name() != "idemq.handler" {
			t.Errorf("C's span %s has parent %v, not a handler span at B", s.Name(), s.Parent())
			continue
		}
		processB, ok := byID[handler.Parent().SpanID()]
		if !ok || !orderOf[processB.Parent().SpanID()] || processB.SpanContext().TraceID() != s.SpanContext().TraceID() {
			t.Errorf("B's handler span %v does not descend from an order's span at A", handler.SpanContext())
			continue
		}
		traced++
	}
	if traced != len(ordered) {
		t.Errorf("%d traces run from A's transaction to C's effect, want %d", traced, len(ordered))
	}
	return traced
}

// checkRelayed checks that the relays' send spans reach every row's
// creation context, as parent or link: A's order spans for the orders,
// and B's handler spans (the parents of C's spans) for the payments. It
// returns how many rows' contexts they reach.
func checkRelayed(t *testing.T, ended []sdktrace.ReadOnlySpan, ordered []trace.SpanContext, ordersTopic, paymentsTopic string) int {
	t.Helper()
	reached := map[string]map[trace.SpanID]bool{ordersTopic: {}, paymentsTopic: {}}
	for _, s := range ended {
		for topic, ids := range reached {
			if s.Name() != "send "+topic || s.InstrumentationScope().Name != "github.com/idemq/idemq/remoting" {
				continue
			}
			ids[s.Parent().SpanID()] = true
			for _, l := range s.Links() {
				ids[l.SpanContext.SpanID()] = true
			}
		}
	}
	n := 0
	for _, sc := range ordered {
		if reached[ordersTopic][sc.SpanID()] {
			n++
		}
	}
	if n != len(ordered) {
		t.Errorf("the relay's send spans reach %d of %d orders' spans", n, len(ordered))
	}
	m := 0
	for _, s := range ended {
		if s.SpanKind() == trace.SpanKindConsumer && s.Name() == "process "+paymentsTopic {
			if reached[paymentsTopic][s.Parent().SpanID()] {
				m++
			} else {
				t.Errorf("no send span of the payment that C's span %v processed reaches its emitter %v", s.SpanContext(), s.Parent())
			}
		}
	}
	return n + m
}

// consumerSpans counts the consumer spans of topic's messages in ended.
func consumerSpans(ended []sdktrace.ReadOnlySpan, topic string) int {
	n := 0
	for _, s := range ended {
		if s.SpanKind() == trace.SpanKindConsumer && s.Name() == "process "+topic {
			n++
		}
	}
	return n
}

// injectTrace is the outboxes' Config.TraceContext: through the program's
// propagator.
func injectTrace(ctx context.Context, p map[string]string) {
	otel.GetTextMapPropagator().Inject(ctx, propagation.MapCarrier(p))
}
