//go:build unix

package consumer_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/internal/adapter"
)

// TestProcessAllocations pins what one message costs the consumer path in
// allocations (one message per call, as a push consumer delivers by
// default, over memdedupe): its verdicts, the guard's slices of a batch of
// one (results, claim, lease, ticket: one allocation), and the store's
// answers; fingerprints and tokens come out of shared chunks. A change
// that makes a delivery's items or closures escape to the heap, as a call
// through an interface does, fails it; BenchmarkProcess measures the rest.
func TestProcessAllocations(t *testing.T) {
	const want = 3
	c, err := consumer.New(memdedupe.New(memdedupe.Config{}), "allocs",
		consumer.WithKeyFallback(func(m *consumer.Message) string { return m.ID }),
		consumer.WithGuard(dedupe.GuardConfig{Retention: benchRetention}), consumer.AcceptShortRetention(),
		consumer.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	h := func(context.Context, *consumer.Message) error { return nil }
	keys := benchKeys()
	msgs := []consumer.Message{{Topic: "orders", Body: benchBody}}
	// A context that is never cancelled, as rocketmq-client-go's callbacks
	// get: with a cancellable one the guard settles under a timeout of its
	// own, which costs a timer and contexts.
	ctx := context.Background()
	n := 0
	allocs := testing.AllocsPerRun(1000, func() {
		msgs[0].ID = keys[n%len(keys)]
		n++
		if vs := adapter.Process(ctx, c, msgs, h, adapter.Waiting{}, nil); vs[0].Action != adapter.Ack {
			t.Fatalf("verdict %+v, want ack", vs[0])
		}
	})
	if allocs > want {
		t.Errorf("%.1f allocations per message, want at most %d", allocs, want)
	}
}
