package memdedupe_test

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/internal/testkit"
)

// benchLease is the lease of the benchmarks' claims: no run outlives it.
const benchLease = time.Minute

// BenchmarkClaimComplete measures the happy path of a consumer — claim a
// fresh key, then complete it — with Claim and Complete (batch=1) and, in
// batches of 32, through dedupe.Claim and dedupe.Complete (which
// serve this store one call at a time and add their result slices). Each
// runs with one goroutine ("serial") and with GOMAXPROCS ("parallel"), and
// reports msgs/s and the records the store held at the end. The keys are
// built before the timer starts, so B/op and allocs/op are the store's (and
// the batch helpers') alone.
//
// Completed records are kept for a retention on the store's real clock, so
// the store holds what one retention's worth of messages leaves behind. At
// 1ms that is a few thousand records, which stay in the CPU's caches: the
// store's own cost. At 1s it is a million or more, so each fresh key adds
// the cache and TLB misses of tables that size, and a run of a second or
// two is mostly the store growing to it: the memory's cost, which grows as
// the store gets faster.
func BenchmarkClaimComplete(b *testing.B) {
	for _, retention := range []time.Duration{time.Millisecond, time.Second} {
		for _, mode := range []string{"serial", "parallel"} {
			for _, size := range []int{1, 32} {
				b.Run(fmt.Sprintf("retention=%v/%s/idemq-batch=%d", retention, mode, size), func(b *testing.B) {
					run(b, mode, size, retention, memdedupe.New(memdedupe.Config{}))
				})
			}
		}
	}
}

// benchRefs returns distinct Refs by number: 2^28 of them, the key and
// group strings built once, so that taking a fresh one allocates nothing.
var benchRefs = sync.OnceValue(func() func(n uint64) dedupe.Ref {
	const keyBits, groupBits = 16, 12
	keys := make([]string, 1<<keyBits)
	for i := range keys {
		keys[i] = "order-" + strconv.Itoa(i)
	}
	groups := make([]string, 1<<groupBits)
	for i := range groups {
		groups[i] = "group-" + strconv.Itoa(i)
	}
	return func(n uint64) dedupe.Ref {
		// Past 2^28 the numbers wrap onto keys whose records have expired
		// long since (a run that long takes over a minute), which Claim
		// takes as fresh.
		return dedupe.Ref{Group: groups[n>>keyBits%(1<<groupBits)], Key: keys[n%(1<<keyBits)]}
	}
})

// run claims and completes size fresh keys b.N times and reports the
// messages per second.
func run(b *testing.B, mode string, size int, retention time.Duration, s *memdedupe.Store) {
	ref := benchRefs()
	ctx := b.Context()
	var next atomic.Uint64 // the next unused key number
	one := func(reqs []dedupe.Item, tickets []dedupe.Ticket) {
		first := next.Add(uint64(size)) - uint64(size)
		for i := range reqs {
			reqs[i] = dedupe.Item{Ref: ref(first + uint64(i))}
		}
		if err := testkit.ClaimComplete(ctx, s, reqs, tickets, benchLease, retention); err != nil {
			b.Error(err)
		}
	}
	b.ResetTimer()
	if mode == "serial" {
		reqs, tickets := make([]dedupe.Item, size), make([]dedupe.Ticket, size)
		for b.Loop() {
			one(reqs, tickets)
		}
	} else {
		b.RunParallel(func(pb *testing.PB) {
			reqs, tickets := make([]dedupe.Item, size), make([]dedupe.Ticket, size)
			for pb.Next() {
				one(reqs, tickets)
			}
		})
	}
	b.ReportMetric(float64(next.Load())/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(memdedupe.Records(s)), "records")
}
