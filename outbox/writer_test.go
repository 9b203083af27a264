package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/outbox"
)

// TestRollbackShipsNothing adds messages in a transaction that rolls back
// and in one that commits: the relay ships exactly the committed ones, with
// the keys Add returned, their fields intact.
func TestRollbackShipsNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e env) {
		ctx := t.Context()
		tx := begin(t, e.db)
		if _, err := e.o.Add(ctx, tx, outbox.Message{Topic: "orders", Body: []byte("rolled back")}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		msgs := []outbox.Message{
			{Topic: "orders", Tags: "created", Keys: []string{"order-1"}, Body: []byte("one"),
				Properties: map[string]string{"tenant": "a"}, OrderingKey: "order-1"},
			{Topic: "orders", Body: []byte("two"), Properties: map[string]string{msgkey.Property: "business-2"}},
			{Topic: "payments", Body: []byte("three")},
		}
		keys := testkit.AddCommitted(t, e.db, e.o, msgs...)
		if keys[1] != "business-2" {
			t.Errorf("a caller's key became %q", keys[1])
		}
		if msgs[0].Properties[msgkey.Property] != "" || len(msgs[0].Keys) != 1 {
			t.Errorf("Add changed the caller's message: %+v", msgs[0])
		}
		rec := new(recorder)
		r := newRelay(t, e.o, rec, outbox.RelayConfig{})
		waitStats(t, e.o, "three rows sent", func(s outbox.Counts) bool { return s.Sent == 3 })
		r.Close()
		got := rec.sent()
		if len(got) != 3 {
			t.Fatalf("shipped %d messages, want 3: %+v", len(got), got)
		}
		byKey := map[string]outbox.Message{}
		for _, m := range got {
			byKey[msgkey.Of(msgkey.Properties(m.Properties))] = m
		}
		for i, k := range keys {
			m, ok := byKey[k]
			if !ok {
				t.Fatalf("key %s not shipped; shipped %+v", k, got)
			}
			if m.Topic != msgs[i].Topic || string(m.Body) != string(msgs[i].Body) || !slices.Contains(m.Keys, k) || m.OrderingKey != msgs[i].OrderingKey {
				t.Errorf("message %d shipped as %+v", i, m)
			}
		}
		if m := byKey[keys[0]]; m.Tags != "created" || m.Properties["tenant"] != "a" || !slices.Contains(m.Keys, "order-1") {
			t.Errorf("first message lost fields: %+v", m)
		}
		if st := r.Stats(); st.Shipped != 3 || st.Parked != 0 || st.LeaseLost != 0 {
			t.Errorf("relay stats %+v", st)
		}
	})
}

// TestAddRefuses hands Add messages that can never ship: each is refused
// with its sentinel and nothing of the batch is written. An Outbox without
// a key source writes a message with its own key, and refuses one without.
func TestAddRefuses(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e env) {
		ok := outbox.Message{Topic: "orders", Body: []byte("fine")}
		for _, tc := range []struct {
			name string
			m    outbox.Message
			want error
		}{
			{"oversized body", outbox.Message{Topic: "t", Body: make([]byte, 1<<10+1)}, outbox.ErrInvalidMessage},
			{"empty body", outbox.Message{Topic: "t"}, outbox.ErrInvalidMessage},
			{"empty topic", outbox.Message{Body: []byte("x")}, outbox.ErrInvalidMessage},
			{"topic with a space", outbox.Message{Topic: "a b", Body: []byte("x")}, outbox.ErrInvalidMessage},
			{"topic with a wildcard", outbox.Message{Topic: "orders.*", Body: []byte("x")}, outbox.ErrInvalidMessage},
			{"long topic", outbox.Message{Topic: strings.Repeat("t", 128), Body: []byte("x")}, outbox.ErrInvalidMessage},
			{"key with a space", outbox.Message{Topic: "t", Body: []byte("x"), Properties: map[string]string{msgkey.Property: "a b"}}, msgkey.ErrInvalid},
			{"key too long", outbox.Message{Topic: "t", Body: []byte("x"), Properties: map[string]string{msgkey.Property: strings.Repeat("k", msgkey.MaxLen+1)}}, msgkey.ErrInvalid},
			{"property with a separator", outbox.Message{Topic: "t", Body: []byte("x"), Properties: map[string]string{"p": "a\x01b"}}, outbox.ErrInvalidMessage},
			{"keys with a space", outbox.Message{Topic: "t", Body: []byte("x"), Keys: []string{"a b"}}, outbox.ErrInvalidMessage},
			{"negative delay", outbox.Message{Topic: "t", Body: []byte("x"), Delay: -1}, outbox.ErrInvalidMessage},
		} {
			t.Run(tc.name, func(t *testing.T) {
				tx := begin(t, e.db)
				if _, err := e.o.AddBatch(t.Context(), tx, []outbox.Message{ok, tc.m}); !errors.Is(err, tc.want) {
					t.Fatalf("AddBatch: %v, want %v", err, tc.want)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
			})
		}
		if s, err := e.o.Count(t.Context()); err != nil || s != (outbox.Counts{}) {
			t.Fatalf("after refusals the table holds %+v (%v)", s, err)
		}

		o, err := outbox.New(e.db, e.b.Dialect, nil, outbox.Config{})
		if err != nil {
			t.Fatal(err)
		}
		tx := begin(t, e.db)
		// A dotted name, as Kafka topics and NATS subjects have.
		if k, err := o.Add(t.Context(), tx, outbox.Message{Topic: "orders.created", Body: []byte("x"), Properties: map[string]string{msgkey.Property: "own"}}); err != nil || k != "own" {
			t.Fatalf("Add with a key: %q, %v", k, err)
		}
		if _, err := o.Add(t.Context(), tx, outbox.Message{Topic: "t", Body: []byte("x")}); err == nil || !strings.Contains(err.Error(), "no key source") {
			t.Fatalf("Add without a key: %v", err)
		}
	})
}

// TestNewRefuses checks the settings New turns down before touching the
// database, each with an error that names what is wrong.
func TestNewRefuses(t *testing.T) {
	db, err := sql.Open("sqlite", ":memory:") // never connects
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tests := []struct {
		name string
		db   *sql.DB
		kind dialect.Dialect
		cfg  outbox.Config
		says string // "" for a New that succeeds
	}{
		{"Defaults", db, dialect.SQLite, outbox.Config{}, ""},
		{"NilDB", nil, dialect.SQLite, outbox.Config{}, "nil *sql.DB"},
		{"NoDialect", db, 0, outbox.Config{}, "unknown dialect Dialect(0)"},
		{"UnknownDialect", db, dialect.SQLite + 1, outbox.Config{}, "unknown dialect Dialect(4)"},
		{"TableQuote", db, dialect.Postgres, outbox.Config{Table: `t"; DROP TABLE x; --`}, "table name"},
		{"NegativeMaxBody", db, dialect.MySQL, outbox.Config{MaxBody: -1}, "max body -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := outbox.New(tt.db, tt.kind, nil, tt.cfg)
			if tt.says == "" {
				if err != nil {
					t.Fatalf("New = %v, want ok", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("New = %v, want an error saying %q", err, tt.says)
			}
		})
	}
}

// TestAddCarriesTraceContext: with Config.TraceContext, a message added
// under a span ships with that span's context in its traceparent property,
// so that the consumer's span continues the business transaction's trace;
// one that carries a context keeps it.
func TestAddCarriesTraceContext(t *testing.T) {
	forBackends(t, []testdb.Backend{testdb.SQLite}, func(t *testing.T, e env) {
		o, err := outbox.New(e.db, e.b.Dialect, new(counter), outbox.Config{
			TraceContext: func(ctx context.Context, p map[string]string) {
				propagation.TraceContext{}.Inject(ctx, propagation.MapCarrier(p))
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{7}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled})
		ctx := trace.ContextWithSpanContext(t.Context(), sc)
		carried := "00-08000000000000000000000000000000-0200000000000000-01"
		tx := begin(t, e.db)
		keys, err := o.AddBatch(ctx, tx, []outbox.Message{
			{Topic: "orders", Body: []byte("in the span")},
			{Topic: "orders", Body: []byte("carried"), Properties: map[string]string{"traceparent": carried}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		rec := new(recorder)
		r := newRelay(t, o, rec, outbox.RelayConfig{})
		waitStats(t, o, "two rows sent", func(s outbox.Counts) bool { return s.Sent == 2 })
		r.Close()
		want := map[string]string{keys[0]: "00-07000000000000000000000000000000-0100000000000000-01", keys[1]: carried}
		for _, m := range rec.sent() {
			k := msgkey.Of(msgkey.Properties(m.Properties))
			if m.Properties["traceparent"] != want[k] {
				t.Errorf("message %s shipped with traceparent %q, want %q", k, m.Properties["traceparent"], want[k])
			}
		}
	})
}
