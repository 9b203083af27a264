package testkit

import (
	"fmt"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
)

// BenchInspector measures in, which must also be s: Get of one record, a
// List page of 100 (walking a group page by page, starting over at its
// end), and Stats of one group. It first claims groups groups of size
// records each in namespace, completing every other one. Each sub-benchmark
// reports records/s, the records it read per second.
func BenchInspector(b *testing.B, s dedupe.Store, namespace string, groups, size int) {
	in, ok := s.(dedupe.Inspector)
	if !ok {
		b.Fatalf("%T does not implement dedupe.Inspector", s)
	}
	ctx := b.Context()
	group := func(g int) string { return fmt.Sprint("group", g) }
	for g := range groups {
		var reqs []dedupe.Item
		for i := range size {
			reqs = append(reqs, dedupe.Item{Ref: dedupe.Ref{Namespace: namespace, Group: group(g), Key: fmt.Sprintf("order-%06d", i)}})
		}
		for i := 0; i < len(reqs); i += 500 {
			batch := reqs[i:min(i+500, len(reqs))]
			res, _, err := s.Claim(ctx, batch, time.Hour)
			if err != nil {
				b.Fatal(err)
			}
			var ts []dedupe.Ticket
			for j, r := range res {
				if j%2 == 0 && r.Outcome == dedupe.Acquired {
					ts = append(ts, dedupe.Ticket{Ref: batch[j].Ref, Token: r.Token})
				}
			}
			if _, err := s.Complete(ctx, ts, time.Hour); err != nil {
				b.Fatal(err)
			}
		}
	}
	ref := dedupe.Ref{Namespace: namespace, Group: group(0), Key: fmt.Sprintf("order-%06d", size/2)}
	b.Run("Get/idemq", func(b *testing.B) {
		for b.Loop() {
			if _, ok, err := in.Get(ctx, ref); err != nil || !ok {
				b.Fatalf("Get(%q) = %v, %v", ref, ok, err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
	b.Run("ListPage100/idemq", func(b *testing.B) {
		req := dedupe.ListRequest{Namespace: namespace, Group: group(0), Limit: 100}
		read := 0
		for b.Loop() {
			page, next, err := in.List(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			read += len(page)
			req.Cursor = next
		}
		b.ReportMetric(float64(read)/b.Elapsed().Seconds(), "records/s")
	})
	b.Run(fmt.Sprintf("Stats%d/idemq", size), func(b *testing.B) {
		for b.Loop() {
			st, err := in.Stats(ctx, namespace, group(0))
			if err != nil || st.Processing+st.Done != int64(size) {
				b.Fatalf("Stats = %+v, %v; want %d records", st, err, size)
			}
		}
		b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "records/s")
	})
}
