package remoting_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/remoting"
)

// benchBatch is the batch size of the benchmarks, the client's default
// pull batch.
const benchBatch = 32

// benchGuard is short retention, so that the records of a long run expire
// instead of filling Redis's memory; the Consumers take it with
// consumer.AcceptShortRetention.
var benchGuard = dedupe.GuardConfig{Retention: 5 * time.Second}

// BenchmarkBatch measures the happy path on a real Redis — batches of 32
// fresh messages whose handler succeeds at once — deduplicated one message
// at a time (two round trips each) and as a batch (two round trips in all),
// through the guard and through the consumer's callback (32 callbacks of one
// message, as the client delivers by default, and one of 32), and reports
// msgs/s. Compare them within one run.
func BenchmarkBatch(b *testing.B) {
	store, _ := newRedisStore(b, fmt.Sprintf("bench:%d-%d:", os.Getpid(), time.Now().UnixNano()))
	g, err := dedupe.NewGuard(store, benchGuard)
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	noop := func(context.Context, int) error { return nil }

	b.Run("guard/DoOne", func(b *testing.B) {
		item := make([]dedupe.Item, 1)
		benchFresh(b, func(refs []dedupe.Ref) error {
			for _, r := range refs {
				item[0] = dedupe.Item{Ref: r}
				if res := g.Do(ctx, item, noop); res[0].Outcome != dedupe.Completed {
					return fmt.Errorf("Do = %v, %v", res[0].Outcome, res[0].Err)
				}
			}
			return nil
		})
	})
	b.Run("guard/DoBatch", func(b *testing.B) {
		items := make([]dedupe.Item, benchBatch)
		benchFresh(b, func(refs []dedupe.Ref) error {
			for i, r := range refs {
				items[i] = dedupe.Item{Ref: r}
			}
			for i, r := range g.Do(ctx, items, noop) {
				if r.Outcome != dedupe.Completed {
					return fmt.Errorf("Do item %d = %v, %v", i, r.Outcome, r.Err)
				}
			}
			return nil
		})
	})

	opts := []consumer.Option{consumer.WithGuard(benchGuard), consumer.AcceptShortRetention(), consumer.WithLogger(slog.New(slog.DiscardHandler))}
	handle := func(context.Context, *consumer.Message) error { return nil }
	for _, per := range []struct {
		name string
		size int // messages per callback
	}{{"ConcurrentlyOne", 1}, {"ConcurrentlyBatch", benchBatch}} {
		b.Run("callback/"+per.name, func(b *testing.B) {
			c, err := consumer.New(store, "bench-"+rand.Text(), opts...)
			if err != nil {
				b.Fatal(err)
			}
			benchCallback(b, remoting.Concurrently(c, handle), per.size)
		})
	}
}

// benchFresh calls cycle with batches of fresh refs and reports msgs/s.
func benchFresh(b *testing.B, cycle func([]dedupe.Ref) error) {
	group := rand.Text() // fresh for every run of b's function
	refs := make([]dedupe.Ref, benchBatch)
	n := 0
	for b.Loop() {
		for i := range refs {
			refs[i] = dedupe.Ref{Group: group, Key: strconv.Itoa(n)}
			n++
		}
		if err := cycle(refs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
}

// benchCallback delivers batches of fresh messages to cb, size messages per
// call, and reports msgs/s.
func benchCallback(b *testing.B, cb callback, size int) {
	prefix := rand.Text() // fresh for every run of b's function
	msgs := make([]*primitive.MessageExt, benchBatch)
	n := 0
	for b.Loop() {
		for i := range msgs {
			msgs[i] = msg(prefix + strconv.Itoa(n))
			n++
		}
		for part := range slices.Chunk(msgs, size) {
			if res, err := cb(context.Background(), part...); res != rmq.ConsumeSuccess || err != nil {
				b.Fatalf("callback = %v, %v", res, err)
			}
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
}
