package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// installMetrics installs the OpenTelemetry metrics SDK as the global
// meter provider, which the consumer reports to by default, and returns a
// function that prints what it collected: messages by outcome and the mean
// claim and handler latencies. An application would install a periodic
// reader with an OTLP or Prometheus exporter instead of a manual reader.
func installMetrics() (report func(context.Context) error) {
	reader := sdkmetric.NewManualReader()
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	return func(ctx context.Context) error {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(ctx, &rm); err != nil {
			return err
		}
		var outcomes []string
		latency := map[string]string{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				switch d := m.Data.(type) {
				case metricdata.Sum[int64]:
					for _, dp := range d.DataPoints {
						out, _ := dp.Attributes.Value("outcome")
						outcomes = append(outcomes, fmt.Sprintf("%s=%d", out.AsString(), dp.Value))
					}
				case metricdata.Histogram[float64]:
					var n uint64
					var sum float64
					for _, dp := range d.DataPoints {
						n, sum = n+dp.Count, sum+dp.Sum
					}
					if n > 0 {
						latency[m.Name] = fmt.Sprintf("%v over %d", time.Duration(sum/float64(n)*float64(time.Second)).Round(time.Microsecond), n)
					}
				}
			}
		}
		sort.Strings(outcomes)
		fmt.Printf("metrics: messages %s; mean claim %s; mean handler %s\n", strings.Join(outcomes, " "),
			latency["idemq.consumer.claim.duration"], latency["idemq.consumer.handler.duration"])
		return nil
	}
}
