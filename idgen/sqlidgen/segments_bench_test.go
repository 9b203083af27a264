package sqlidgen_test

import (
	"context"
	"testing"

	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/internal/idbench"
	"github.com/idemq/idemq/internal/sqldialect"
	"github.com/idemq/idemq/internal/testdb"
)

// BenchmarkSegmentSource measures an ID from a segment allocator over each
// database (idemq, the double buffer and adaptive step at their defaults)
// against the naive way, one conditional UPDATE per ID, on the same table.
// The rows report round trips (statements sent, counted at the driver) per
// segment, and per ID for the baseline.
func BenchmarkSegmentSource(b *testing.B) {
	ctx := context.Background()
	for _, be := range testdb.Backends {
		h := &testdb.Hooks{}
		db := be.OpenWith(b, h)
		s := newSegments(b, db, be.Dialect, "")
		for _, tag := range []string{"bench", "naive"} {
			if err := s.CreateTag(ctx, segment.Tag{Tag: tag, Step: 1000}); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(be.Name+"/idemq", func(b *testing.B) {
			idbench.Allocator(b, s, "bench", h.RoundTrips)
		})
		naive := map[sqldialect.Dialect]string{
			sqldialect.MySQL:    "UPDATE idemq_segment SET max_id = LAST_INSERT_ID(max_id + 1) WHERE biz_tag = ?",
			sqldialect.Postgres: "UPDATE idemq_segment SET max_id = max_id + 1 WHERE biz_tag = $1 RETURNING max_id",
			sqldialect.SQLite:   "UPDATE idemq_segment SET max_id = max_id + 1 WHERE biz_tag = ? RETURNING max_id",
		}[be.Dialect]
		name := "/naive-update-returning"
		if be.Dialect == sqldialect.MySQL {
			name = "/naive-last-insert-id"
		}
		b.Run(be.Name+name, func(b *testing.B) {
			// Prepared, as Segments' UPDATE is: one round trip an ID.
			stmt, err := db.PrepareContext(ctx, naive)
			if err != nil {
				b.Fatal(err)
			}
			defer stmt.Close()
			rts := h.RoundTrips()
			var id int64
			for b.Loop() {
				if be.Dialect == sqldialect.MySQL {
					res, err := stmt.ExecContext(ctx, "naive")
					if err == nil {
						id, err = res.LastInsertId()
					}
					if err != nil {
						b.Fatal(err)
					}
				} else if err := stmt.QueryRowContext(ctx, "naive").Scan(&id); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(h.RoundTrips()-rts)/float64(b.N), "rt/id")
		})
	}
}
