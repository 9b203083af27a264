package testkit

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// Round is one timed consumption of a topic in an end-to-end benchmark:
// its rate, and the CPU time each process spent meanwhile.
type Round struct {
	Rate float64
	CPU  map[string]time.Duration
}

// AddCPU adds sign times the CPU time of each of pids (name → pid, see
// [ProcessCPU]) to r.CPU: -1 at the start of the timed window, +1 at its
// end. It returns the first failure to read one.
func (r *Round) AddCPU(sign time.Duration, pids map[string]int) error {
	if r.CPU == nil {
		r.CPU = map[string]time.Duration{}
	}
	var first error
	for name, pid := range pids {
		t, err := ProcessCPU(pid)
		if err != nil && first == nil {
			first = err
		}
		r.CPU[name] += sign * t
	}
	return first
}

// ReportRounds reports the rounds of each variant (rounds[i] of names[i];
// the first variant is ours) of a benchmark that consumed messages
// messages a round: the medians of ns/op, msgs/s and the CPU time per
// message of each process (cpu-µs/msg for "cpu", the benchmark's own
// process; <name>-µs/msg for the others), prefixed "<name>-" for every
// variant but the first, and tax-% (1 - ours/theirs) against each variant
// named in baselines; and it logs every round's rate.
func ReportRounds(b *testing.B, names []string, rounds [][]Round, messages int, baselines ...string) {
	var log strings.Builder
	rate := make([]float64, len(names))
	for i, name := range names {
		prefix := name + "-"
		if i == 0 {
			prefix = ""
		}
		rate[i] = median(rounds[i], func(r Round) float64 { return r.Rate })
		fmt.Fprintf(&log, "%s: %.0f msgs/s (rounds:", name, rate[i])
		for _, r := range rounds[i] {
			fmt.Fprintf(&log, " %.0f", r.Rate)
		}
		log.WriteString(")")
		b.ReportMetric(1e9/rate[i], prefix+"ns/op")
		b.ReportMetric(rate[i], prefix+"msgs/s")
		var procs []string
		if len(rounds[i]) > 0 {
			procs = slices.Sorted(maps.Keys(rounds[i][0].CPU))
		}
		for _, proc := range procs {
			unit := proc + "-µs/msg"
			if proc == "cpu" {
				unit = "cpu-µs/msg"
			}
			cpu := median(rounds[i], func(r Round) float64 { return r.CPU[proc].Seconds() * 1e6 / float64(messages) })
			fmt.Fprintf(&log, ", %s %.1f", unit, cpu)
			b.ReportMetric(cpu, prefix+unit)
		}
		log.WriteString("\n")
		if slices.Contains(baselines, name) {
			b.ReportMetric(100*(1-rate[0]/rate[i]), "tax-%")
		}
	}
	b.Log(strings.TrimSpace(log.String()))
}

// median returns the median of f over rs.
func median[T any](rs []T, f func(T) float64) float64 {
	var xs []float64
	for _, r := range rs {
		xs = append(xs, f(r))
	}
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}
