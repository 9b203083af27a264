//go:build unix

package consumer_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/internal/adapter"
	"github.com/idemq/idemq/internal/testkit"
)

// BenchmarkProcess measures the consumer path's own cost against a bare
// callback in the same run: messages of 200 bytes with fresh keys, a handler
// that does nothing, one message or 32 per call (a push consumer's default
// and the batch size that makes the store's round trips cheap), from one
// goroutine and from 20 (the push consumer's default ConsumeGoroutineNums).
// The consumer path is the adapters' Process over memdedupe with default
// options; the bare callback calls the handler for each message and
// answers its verdicts, as a client callback must, and nothing else. The
// two take turns in phases, so that the load of a shared machine falls on
// both alike.
//
// ns/op (wall time), cpu-ns/msg (the process's CPU time, garbage
// collection included), B/op and allocs/op (and allocs/msg, unrounded) are
// the consumer path's, per message; the bare- metrics the bare callback's,
// whose one allocation per call is its verdicts. x-bare-cpu and
// x-bare-allocs are the ratios of the two sides' CPU times (which a
// machine busy with other work leaves nearly as they are while it
// stretches wall times) and allocations.
func BenchmarkProcess(b *testing.B) {
	for _, batch := range []int{1, 32} {
		for _, g := range []int{1, 20} {
			mode := "serial"
			if g > 1 {
				mode = fmt.Sprintf("goroutines=%d", g)
			}
			b.Run(fmt.Sprintf("batch=%d/%s", batch, mode), func(b *testing.B) { benchProcess(b, batch, g) })
		}
	}
}

// benchKeys are the message keys of BenchmarkProcess, built once so that
// giving a message a key allocates nothing. They come round every 2^16
// messages, by which time a key's record, kept for benchRetention, has
// expired and its claim is fresh again.
var benchKeys = sync.OnceValue(func() []string {
	keys := make([]string, 1<<16)
	for i := range keys {
		keys[i] = "order-" + strconv.Itoa(i)
	}
	return keys
})

// benchRetention is short, so that the store's records expire before
// their keys come round again and memory stays flat (hence
// consumer.AcceptShortRetention).
const benchRetention = time.Millisecond

var benchBody = bytes.Repeat([]byte("0123456789"), 20)

// A side is one way of handling a call's messages: the consumer path or the
// bare callback. It answers a verdict per message.
type side func(ctx context.Context, msgs []consumer.Message) []adapter.Verdict

func benchProcess(b *testing.B, batch, g int) {
	c, err := consumer.New(memdedupe.New(memdedupe.Config{}), "bench",
		// The key is the message id: no properties to build per message.
		consumer.WithKeyFallback(func(m *consumer.Message) string { return m.ID }),
		consumer.WithGuard(dedupe.GuardConfig{Retention: benchRetention}), consumer.AcceptShortRetention(),
		consumer.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatal(err)
	}
	h := func(context.Context, *consumer.Message) error { return nil }
	path := func(ctx context.Context, msgs []consumer.Message) []adapter.Verdict {
		return adapter.Process(ctx, c, msgs, h, adapter.Waiting{}, nil)
	}
	bare := func(ctx context.Context, msgs []consumer.Message) []adapter.Verdict {
		vs := make([]adapter.Verdict, len(msgs))
		for i := range msgs {
			if err := h(ctx, &msgs[i]); err != nil {
				vs[i] = adapter.Verdict{Action: adapter.Retry, Outcome: dedupe.Failed, Err: err}
				continue
			}
			vs[i] = adapter.Verdict{Action: adapter.Ack, Outcome: dedupe.Completed}
		}
		return vs
	}

	var next atomic.Uint64 // the number of the next message's key
	// Each goroutine's messages, built once: the sides' allocations are
	// theirs alone.
	bufs := make([][]consumer.Message, g)
	for w := range bufs {
		bufs[w] = make([]consumer.Message, batch)
		for i := range bufs[w] {
			bufs[w][i] = consumer.Message{Topic: "orders", Body: benchBody}
		}
	}
	sides := [2]struct {
		s              side
		spent, cpu     time.Duration
		allocs, allocB uint64
	}{{s: path}, {s: bare}}
	calls := max(b.N/batch, 1)
	phase := max(calls/8, min(calls, 256/batch+1))
	var before, after runtime.MemStats
	b.ReportAllocs() // overridden below with the path's figures
	b.ResetTimer()
	for round, done := 0, 0; done < calls; round++ {
		n := min(phase, calls-done)
		for k := range 2 {
			s := &sides[(round+k)%2]
			runtime.ReadMemStats(&before)
			cpu := testkit.OwnCPU(b)
			elapsed, err := runCalls(bufs, n, &next, s.s)
			s.cpu += testkit.OwnCPU(b) - cpu
			runtime.ReadMemStats(&after)
			if err != nil {
				b.Fatal(err)
			}
			s.spent += elapsed
			s.allocs += after.Mallocs - before.Mallocs
			s.allocB += after.TotalAlloc - before.TotalAlloc
		}
		done += n
	}
	b.StopTimer()
	msgs := float64(calls * batch)
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / msgs }
	cpu, bareCPU := per(sides[0].cpu), per(sides[1].cpu)
	allocs, bareAllocs := float64(sides[0].allocs)/msgs, float64(sides[1].allocs)/msgs
	b.ReportMetric(per(sides[0].spent), "ns/op")
	b.ReportMetric(float64(sides[0].allocB)/msgs, "B/op")
	b.ReportMetric(allocs, "allocs/op")
	b.ReportMetric(allocs, "allocs/msg") // allocs/op is printed rounded
	b.ReportMetric(cpu, "cpu-ns/msg")
	b.ReportMetric(per(sides[1].spent), "bare-ns/msg")
	b.ReportMetric(bareCPU, "bare-cpu-ns/msg")
	b.ReportMetric(bareAllocs, "bare-allocs/msg")
	b.ReportMetric(cpu/bareCPU, "x-bare-cpu")
	b.ReportMetric(allocs/bareAllocs, "x-bare-allocs")
}

// runCalls makes n calls of s, from a goroutine per buffer of messages,
// each call with its buffer's messages given fresh keys, and returns the
// wall time they took and the first error.
func runCalls(bufs [][]consumer.Message, n int, next *atomic.Uint64, s side) (time.Duration, error) {
	keys := benchKeys()
	var (
		left  atomic.Int64
		errMu sync.Mutex
		first error
	)
	left.Store(int64(n))
	work := func(msgs []consumer.Message) {
		ctx := context.Background()
		batch := uint64(len(msgs))
		for left.Add(-1) >= 0 {
			k := next.Add(batch) - batch
			for i := range msgs {
				msgs[i].ID = keys[(k+uint64(i))%uint64(len(keys))]
			}
			for i, v := range s(ctx, msgs) {
				// Every key is fresh: its record expired long ago.
				if v.Outcome != dedupe.Completed {
					errMu.Lock()
					first = fmt.Errorf("message %s: %v %v", msgs[i].ID, v.Outcome, v.Err)
					errMu.Unlock()
					return
				}
			}
		}
	}
	start := time.Now()
	if len(bufs) == 1 {
		work(bufs[0])
	} else {
		var wg sync.WaitGroup
		for _, msgs := range bufs {
			wg.Go(func() { work(msgs) })
		}
		wg.Wait()
	}
	return time.Since(start), first
}
