// Command prometheus serves idemq's OpenTelemetry metrics in Prometheus's
// text format at /metrics: the setup docs/operations.md describes, which a
// service adds beside its consumers, outbox and relays. It lives in a
// module of its own so that the OpenTelemetry Prometheus exporter never
// enters idemq's module graph, nor its users'.
//
// Run alone it reports the outbox table of a SQLite database (-outbox);
// alerts.yml holds the alert rules over these metrics (promtool test rules
// alerts_test.yml proves each), and dashboard.json a Grafana dashboard.
package main

import (
	"context"
	"database/sql"
	"flag"
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

func main() {
	listen := flag.String("listen", "127.0.0.1:9464", "address to serve /metrics on")
	path := flag.String("outbox", "", "SQLite database whose outbox table to report")
	flag.Parse()
	mp, err := install()
	if err != nil {
		log.Fatal(err)
	}
	if *path != "" {
		db, err := sql.Open("sqlite", "file:"+*path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
		if err != nil {
			log.Fatal(err)
		}
		ob, err := outbox.New(db, dialect.SQLite, nil, outbox.Config{})
		if err != nil {
			log.Fatal(err)
		}
		if err := ob.Migrate(context.Background()); err != nil {
			log.Fatal(err)
		}
		if _, err := outboxotel.Register(mp, ob); err != nil {
			log.Fatal(err)
		}
	}
	http.Handle("/metrics", promhttp.Handler())
	log.Printf("serving /metrics on %s", *listen)
	log.Fatal(http.ListenAndServe(*listen, nil))
}

// install makes the OpenTelemetry metrics SDK, read by the Prometheus
// exporter, the global meter provider: every consumer reports to it unless
// given consumer.WithTelemetry. The exporter registers with Prometheus's
// default registry, which promhttp.Handler serves with the Go runtime's
// and the process's metrics.
func install() (*metric.MeterProvider, error) {
	exporter, err := prometheus.New()
	if err != nil {
		return nil, err
	}
	mp := metric.NewMeterProvider(metric.WithReader(exporter))
	otel.SetMeterProvider(mp)
	return mp, nil
}
