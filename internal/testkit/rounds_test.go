package testkit_test

import (
	"testing"
	"time"

	"github.com/idemq/idemq/internal/testkit"
)

// TestReportRounds checks the metrics an end-to-end benchmark reports:
// medians, per-message CPU per process, the peers' prefixes and the tax.
func TestReportRounds(t *testing.T) {
	round := func(rate float64, cpu time.Duration) testkit.Round {
		return testkit.Round{Rate: rate, CPU: map[string]time.Duration{"cpu": cpu, "redis": cpu / 2}}
	}
	res := testing.Benchmark(func(b *testing.B) {
		testkit.ReportRounds(b, []string{"idemq", "dedupe-off", "naive"}, [][]testkit.Round{
			{round(100, 4*time.Millisecond), round(300, 2*time.Millisecond), round(200, time.Millisecond)},
			{round(400, time.Millisecond), round(400, time.Millisecond)},
			{round(50, 8*time.Millisecond)},
		}, 1000, "dedupe-off")
	})
	for name, want := range map[string]float64{
		"msgs/s": 200, "ns/op": 5e6, "cpu-µs/msg": 2, "redis-µs/msg": 1,
		"dedupe-off-msgs/s": 400, "dedupe-off-cpu-µs/msg": 1,
		"naive-msgs/s": 50, "naive-redis-µs/msg": 4,
		"tax-%": 50,
	} {
		if got := res.Extra[name]; got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}
