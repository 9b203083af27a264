package testkit

import "time"

// Latencies is a histogram of durations for benchmarks that report
// quantiles: 1ns buckets to 4µs, then 1µs buckets to 1ms, then one. Adding
// allocates nothing.
type Latencies struct {
	fine   [4096]int64 // by the nanosecond
	coarse [1024]int64 // by the microsecond
	over   int64
	n      int64
	max    time.Duration
}

// Add records d.
func (h *Latencies) Add(d time.Duration) {
	h.n++
	h.max = max(h.max, d)
	switch us := d / time.Microsecond; {
	case d < time.Duration(len(h.fine)):
		h.fine[d]++
	case us < time.Duration(len(h.coarse)):
		h.coarse[us]++
	default:
		h.over++
	}
}

// Max returns the longest duration recorded.
func (h *Latencies) Max() time.Duration { return h.max }

// Quantile returns the duration below which the share q of the samples
// fall, to the bucket.
func (h *Latencies) Quantile(q float64) time.Duration {
	want := int64(q * float64(h.n))
	seen := int64(0)
	for d, c := range h.fine {
		if seen += c; seen > want {
			return time.Duration(d)
		}
	}
	for us, c := range h.coarse {
		if seen += c; seen > want {
			return time.Duration(us+1) * time.Microsecond
		}
	}
	return h.max
}

// TimerCost returns the median of 1000 timings of nothing, each as the
// benchmarks time a call: time.Since(base) before and after.
func TimerCost(base time.Time) time.Duration {
	var h Latencies
	for range 1000 {
		start := time.Since(base)
		h.Add(time.Since(base) - start)
	}
	return h.Quantile(0.5)
}
