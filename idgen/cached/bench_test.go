package cached_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/cached"
	"github.com/idemq/idemq/internal/testkit"
)

// cachedBenchSize is the ring the benchmarks use: 8 MiB of slots, not the
// 64 MiB that benchLayout's default (2^20 IDs per tick, times 8) would take.
const cachedBenchSize = 1 << 20

// nexter is what the benchmarks time: one ID per call.
type nexter interface {
	Next(ctx context.Context) (idgen.ID, error)
}

// cachedPeers are the rows of BenchmarkCached and BenchmarkCachedLatency:
// ours, the generator it draws from, and a naive buffer behind a mutex.
func cachedPeers() []struct {
	name string
	make func(b *testing.B) (nexter, func())
} {
	gen := func(b *testing.B, p idgen.RollbackPolicy) *idgen.Generator {
		g, err := idgen.New(1, idgen.Config{Layout: benchLayout, Rollback: p})
		if err != nil {
			b.Fatal(err)
		}
		return g
	}
	return []struct {
		name string
		make func(b *testing.B) (nexter, func())
	}{
		{"idemq", func(b *testing.B) (nexter, func()) {
			c, err := cached.New(context.Background(), gen(b, idgen.Borrow{MaxAhead: 10 * time.Millisecond}), cached.Config{Size: cachedBenchSize})
			if err != nil {
				b.Fatal(err)
			}
			return c, func() { c.Close() }
		}},
		{"generator", func(b *testing.B) (nexter, func()) {
			g := gen(b, nil)
			return g, func() { g.Close() }
		}},
		{"naive-mutex", func(b *testing.B) (nexter, func()) {
			g := gen(b, idgen.Borrow{MaxAhead: 10 * time.Millisecond})
			return &mutexBuffer{g: g, buf: make([]idgen.ID, 0, cachedBenchSize)}, func() { g.Close() }
		}},
	}
}

// mutexBuffer is the obvious cache: a slice behind a mutex, refilled by the
// caller that finds it empty.
type mutexBuffer struct {
	g   *idgen.Generator
	mu  sync.Mutex
	buf []idgen.ID
}

func (m *mutexBuffer) Next(ctx context.Context) (idgen.ID, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.buf) == 0 {
		m.buf = m.buf[:cap(m.buf)]
		n, err := m.g.Fill(ctx, m.buf)
		m.buf = m.buf[:n]
		if err != nil {
			return 0, err
		}
		slices.Reverse(m.buf) // taken from the end, in order
	}
	id := m.buf[len(m.buf)-1]
	m.buf = m.buf[:len(m.buf)-1]
	return id, nil
}

// BenchmarkCached compares the cached generator's Next with the generator
// it draws from and with a naive mutex-guarded buffer, on one goroutine and
// on all (-parallel). The layout has 2^20 IDs per millisecond, so that the
// cost of an ID, not the clock, limits the rate.
func BenchmarkCached(b *testing.B) {
	for _, p := range cachedPeers() {
		b.Run(p.name, func(b *testing.B) {
			n, stop := p.make(b)
			defer stop()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := n.Next(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "IDs/s")
			reportEmpty(b, n)
		})
		b.Run(p.name+"-parallel", func(b *testing.B) {
			n, stop := p.make(b)
			defer stop()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					if _, err := n.Next(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "IDs/s")
			reportEmpty(b, n)
		})
	}
}

// reportEmpty reports the share of a cached generator's calls that found
// its buffer empty: those that waited for the padder.
func reportEmpty(b *testing.B, n nexter) {
	if c, ok := n.(*cached.Generator); ok {
		s := c.Stats()
		b.ReportMetric(100*float64(s.Empty)/float64(max(s.Taken, 1)), "empty-%")
	}
}

// BenchmarkCachedLatency reports the distribution of one call's latency on
// one goroutine taking IDs as fast as it can, across paddings and, for the
// peers, refills and full ticks. Every 64th call is timed, so that reading
// the clock costs little of the loop; the figures include one reading,
// whose median cost is reported as timer-ns.
func BenchmarkCachedLatency(b *testing.B) {
	for _, p := range cachedPeers() {
		b.Run(p.name, func(b *testing.B) {
			n, stop := p.make(b)
			defer stop()
			ctx := context.Background()
			var h testkit.Latencies
			base := time.Now()
			timer := testkit.TimerCost(base)
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				if i++; i&63 != 0 {
					if _, err := n.Next(ctx); err != nil {
						b.Fatal(err)
					}
					continue
				}
				start := time.Since(base)
				if _, err := n.Next(ctx); err != nil {
					b.Fatal(err)
				}
				h.Add(time.Since(base) - start)
			}
			b.ReportMetric(float64(h.Quantile(0.5)), "p50-ns")
			b.ReportMetric(float64(h.Quantile(0.999)), "p99.9-ns")
			b.ReportMetric(float64(h.Max()), "max-ns")
			b.ReportMetric(float64(timer), "timer-ns")
		})
	}
}
