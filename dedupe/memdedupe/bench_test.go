package memdedupe_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
)

// BenchmarkClaimComplete measures claim then complete per message, one at a
// time and in batches of 32 (which this store serves one call at a time).
func BenchmarkClaimComplete(b *testing.B) {
	for _, size := range []int{1, 32} {
		b.Run(fmt.Sprintf("idemq-batch=%d", size), func(b *testing.B) {
			s := memdedupe.New(memdedupe.Config{})
			ctx := b.Context()
			reqs := make([]dedupe.ClaimRequest, size)
			tickets := make([]dedupe.Ticket, size)
			n := 0
			for b.Loop() {
				for i := range reqs {
					reqs[i] = dedupe.ClaimRequest{Ref: dedupe.Ref{Group: "g", Key: strconv.Itoa(n)}, Lease: time.Minute}
					n++
				}
				res, _, err := dedupe.ClaimBatch(ctx, s, reqs)
				if err != nil {
					b.Fatal(err)
				}
				for i, r := range res {
					tickets[i] = dedupe.Ticket{Ref: reqs[i].Ref, Token: r.Token}
				}
				if _, err := dedupe.CompleteBatch(ctx, s, tickets, time.Second); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
