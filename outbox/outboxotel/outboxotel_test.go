package outboxotel_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/outbox"
	"github.com/idemq/idemq/outbox/outboxotel"
)

func TestMain(m *testing.M) { os.Exit(testenv.Run(m)) }

// refuser ships every message but one with body "poison".
type refuser struct{}

func (refuser) Send(_ context.Context, m *outbox.Message) error {
	if string(m.Body) == "poison" {
		return fmt.Errorf("too large: %w", outbox.ErrRefused)
	}
	return nil
}

// collect returns the points of the outbox's metrics: name, then the
// state attribute or "", to value.
func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					state, _ := p.Attributes.Value("idemq.outbox.state")
					got[m.Name+" "+state.AsString()] = p.Value
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					got[m.Name] = float64(p.Value)
				}
			}
		}
	}
	return got
}

// TestMetrics reads the metrics of a table before and after a relay ships
// its rows and parks one.
func TestMetrics(t *testing.T) {
	b := testdb.SQLite
	db := b.Open(t)
	o, err := outbox.New(db, b.Dialect, nil, outbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	var msgs []outbox.Message
	for i, body := range []string{"a", "poison", "b"} {
		msgs = append(msgs, outbox.Message{Topic: "t", Body: []byte(body), Properties: map[string]string{msgkey.Property: fmt.Sprint("k", i)}})
	}
	testkit.AddCommitted(t, db, o, msgs...)
	r, err := outbox.NewRelay(o, refuser{}, outbox.RelayConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	reg, err := outboxotel.Register(mp, o, r)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()

	var got map[string]float64
	// The relay counts a row after the statement that marks it, so the
	// table can show it sent or parked first: wait for both.
	testkit.WaitFor(t, "the rows shipped and parked", func() bool {
		got = collect(t, reader)
		return got["idemq.outbox.rows pending"] == 0 && got["idemq.outbox.rows parked"] == 1 &&
			got["idemq.outbox.shipped"] == 2 && got["idemq.outbox.parked"] == 1
	})
	want := map[string]float64{
		"idemq.outbox.rows pending": 0, "idemq.outbox.rows sent": 2, "idemq.outbox.rows parked": 1,
		"idemq.outbox.oldest_pending.age ": 0,
		"idemq.outbox.shipped":             2, "idemq.outbox.parked": 1, "idemq.outbox.retries": 0, "idemq.outbox.lease_lost": 0,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (reported %v), want %v", k, g, ok, v)
		}
	}
}
