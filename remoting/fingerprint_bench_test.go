package remoting_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/remoting"
)

// BenchmarkFingerprint measures what the default payload check costs on
// the per-message path, Consumer.Concurrently with a fresh message per
// callback and a handler that does nothing: ns/op is that path's cost per
// message, no-fingerprint-ns/op the same path's with WithoutFingerprint,
// which the bench table shows as a peer row and a ratio. The two take turns
// message by message in one loop, so that the load of a shared machine falls
// on both alike. It runs on memdedupe and a real Redis, with 200-byte bodies
// (as in the end-to-end measurements of notes/perf.md) and 4 KiB ones.
func BenchmarkFingerprint(b *testing.B) {
	redisStore, _ := newRedisStore(b, fmt.Sprintf("benchfp:%d-%d:", os.Getpid(), time.Now().UnixNano()))
	stores := []struct {
		name string
		new  func() dedupe.Store
	}{
		// One each, so that neither sweeps records of the other.
		{"memdedupe", func() dedupe.Store { return memdedupe.New(memdedupe.Config{}) }},
		{"redis", func() dedupe.Store { return redisStore }},
	}
	handle := func(context.Context, *consumer.Message) error { return nil }
	for _, st := range stores {
		for _, size := range []int{200, 4096} {
			b.Run(fmt.Sprintf("%s-%dB/idemq", st.name, size), func(b *testing.B) {
				var cbs [2]callback // with and without the check
				for i, opts := range [][]consumer.Option{nil, {consumer.WithoutFingerprint()}} {
					opts = append(opts, consumer.WithGuard(benchGuard), consumer.AcceptShortRetention(), consumer.WithLogger(slog.New(slog.DiscardHandler)))
					// A group of their own makes every key fresh for both.
					c, err := consumer.New(st.new(), "bench-"+rand.Text(), opts...)
					if err != nil {
						b.Fatal(err)
					}
					cbs[i] = remoting.Concurrently(c, handle)
				}
				m := &primitive.MessageExt{}
				m.Topic, m.Body = "orders", make([]byte, size)
				var spent [2]time.Duration
				n := 0
				for b.Loop() {
					m.WithProperty(msgkey.Property, strconv.Itoa(n))
					for k := range cbs {
						i := (n + k) % len(cbs) // each goes first every other time
						start := time.Now()
						res, err := cbs[i](context.Background(), m)
						spent[i] += time.Since(start)
						if res != rmq.ConsumeSuccess || err != nil {
							b.Fatalf("callback = %v, %v", res, err)
						}
					}
					n++
				}
				b.ReportMetric(float64(spent[0].Nanoseconds())/float64(n), "ns/op")
				b.ReportMetric(float64(spent[1].Nanoseconds())/float64(n), "no-fingerprint-ns/op")
			})
		}
	}
}
