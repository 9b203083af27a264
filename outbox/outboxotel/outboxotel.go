// Package outboxotel reports an outbox table's state and its relays' work
// as OpenTelemetry metrics, through the OpenTelemetry API only (it records
// nothing until the application installs an SDK). Package outbox itself
// links no telemetry.
//
// Metrics, under the meter github.com/idemq/idemq/outbox, each with the
// attribute idemq.outbox.table:
//
//   - idemq.outbox.rows (gauge): the table's rows by state (attribute
//     idemq.outbox.state: pending, sent or parked), read with one query at
//     each collection ([outbox.Outbox.Count]);
//   - idemq.outbox.oldest_pending.age (gauge, seconds): the age of the
//     oldest pending row, 0 without one;
//   - idemq.outbox.shipped, idemq.outbox.retries, idemq.outbox.parked,
//     idemq.outbox.lease_lost (counters): the relays' [outbox.Stats],
//     summed; shipped per second is the first one's rate.
package outboxotel

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/idemq/idemq/outbox"
)

const instrumentationName = "github.com/idemq/idemq/outbox"

// statsTimeout bounds the query a collection runs.
const statsTimeout = 5 * time.Second

// Register reports o's rows and the work of relays (relays of o, from
// this process) to mp until the returned registration is unregistered.
func Register(mp metric.MeterProvider, o *outbox.Outbox, relays ...*outbox.Relay) (metric.Registration, error) {
	if mp == nil || o == nil {
		return nil, errors.New("outboxotel: nil MeterProvider or Outbox")
	}
	m := mp.Meter(instrumentationName)
	var errs []error
	gauge := func(name, unit, desc string) metric.Float64ObservableGauge {
		g, err := m.Float64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	counter := func(name, desc string) metric.Int64ObservableCounter {
		c, err := m.Int64ObservableCounter(name, metric.WithUnit("{row}"), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	rows := gauge("idemq.outbox.rows", "{row}", "Rows of the outbox table, by state.")
	age := gauge("idemq.outbox.oldest_pending.age", "s", "Age of the oldest pending row of the outbox table; 0 without one.")
	shipped := counter("idemq.outbox.shipped", "Rows the relays shipped and marked sent or deleted.")
	retries := counter("idemq.outbox.retries", "Failed sends the relays put back for a backoff.")
	parked := counter("idemq.outbox.parked", "Rows the relays parked: refused by the broker, or out of attempts.")
	lost := counter("idemq.outbox.lease_lost", "Rows the relays shipped after their lease had ended: they may have shipped twice, with the same key.")
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	table := attribute.String("idemq.outbox.table", o.Table())
	inTable := metric.WithAttributes(table)
	byState := func(s outbox.State) metric.ObserveOption {
		return metric.WithAttributes(table, attribute.String("idemq.outbox.state", string(s)))
	}
	return m.RegisterCallback(func(ctx context.Context, obs metric.Observer) error {
		var sum outbox.Stats
		for _, r := range relays {
			st := r.Stats()
			sum.Shipped += st.Shipped
			sum.Retried += st.Retried
			sum.Parked += st.Parked
			sum.LeaseLost += st.LeaseLost
		}
		obs.ObserveInt64(shipped, sum.Shipped, inTable)
		obs.ObserveInt64(retries, sum.Retried, inTable)
		obs.ObserveInt64(parked, sum.Parked, inTable)
		obs.ObserveInt64(lost, sum.LeaseLost, inTable)
		ctx, cancel := context.WithTimeout(ctx, statsTimeout)
		defer cancel()
		st, err := o.Count(ctx)
		if err != nil {
			return err // the counters above are reported still
		}
		obs.ObserveFloat64(rows, float64(st.Pending), byState(outbox.Pending))
		obs.ObserveFloat64(rows, float64(st.Sent), byState(outbox.Sent))
		obs.ObserveFloat64(rows, float64(st.Parked), byState(outbox.Parked))
		obs.ObserveFloat64(age, st.OldestPending.Seconds(), inTable)
		return nil
	}, rows, age, shipped, retries, parked, lost)
}
