package main

import (
	"database/sql"
	"log"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/sdk/metric"
	_ "modernc.org/sqlite" // "sqlite"

	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/outbox"
	"github.com/idemq/idemq/outbox/outboxotel"
)

// Example serves the consumers' and an outbox's metrics at /metrics (not
// run: it would register with the default registry, as the test's scrape
// does).
func Example() {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		log.Fatal(err)
	}
	ob, err := outbox.New(db, dialect.SQLite, nil, outbox.Config{})
	if err != nil {
		log.Fatal(err)
	}
	var relays []*outbox.Relay // the relays of ob this process runs

	exporter, err := prometheus.New() // registers with Prometheus's default registry
	if err != nil {
		log.Fatal(err)
	}
	mp := metric.NewMeterProvider(metric.WithReader(exporter))
	otel.SetMeterProvider(mp) // every consumer reports here, unless given consumer.WithTelemetry
	if _, err := outboxotel.Register(mp, ob, relays...); err != nil {
		log.Fatal(err)
	}
	http.Handle("/metrics", promhttp.Handler())
}
