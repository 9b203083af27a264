package outbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idemq/idemq/internal/sqldialect"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/outbox"
)

// body200 is a 200-byte message body.
var body200 = []byte(strings.Repeat("x", 200))

// BenchmarkAdd measures a business transaction that adds one message
// (idemq-outbox) against one that runs the same INSERT of its own (insert),
// and one that adds a batch of 100 (idemq-batch100, per message): BEGIN, the
// statement, COMMIT.
func BenchmarkAdd(b *testing.B) {
	for _, be := range testdb.Backends {
		b.Run(be.Name, func(b *testing.B) {
			db := be.Open(b)
			o, ctx := newOutbox(b, db, be), context.Background()
			// The same row by hand: an INSERT into a table of the outbox's
			// shape and indexes, with a key of the same length.
			for _, stmt := range o.Schema() {
				if _, err := db.ExecContext(ctx, strings.ReplaceAll(stmt, o.Table(), "plain")); err != nil {
					b.Fatal(err)
				}
			}
			syn := sqldialect.Of(be.Dialect)
			insert := syn.Rebind(`INSERT INTO plain (topic, tags, msg_keys, k, ordering, props, body, state, attempts, due_at, lease_until, owner, last_error, created_at)
VALUES (?, '', ?, ?, '', ?, ?, 0, 0, ` + syn.Now() + `, ` + syn.Now() + `, '', '', ` + syn.Now() + `)`)
			keys := new(counter)
			msg := outbox.Message{Topic: "orders", Body: body200}
			b.Run("insert", func(b *testing.B) {
				for b.Loop() {
					k, _ := keys.NextKey(ctx)
					tx, err := db.BeginTx(ctx, nil)
					if err == nil {
						_, err = tx.ExecContext(ctx, insert, "orders", k, k, `{"IDEMQ_KEY":"`+k+`"}`, body200)
					}
					if err == nil {
						err = tx.Commit()
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			})
			// testkit.AddCommitted: BEGIN, Add's statement, COMMIT.
			b.Run("idemq-outbox", func(b *testing.B) {
				for b.Loop() {
					testkit.AddCommitted(b, db, o, msg)
				}
			})
			b.Run("idemq-batch100", func(b *testing.B) {
				msgs := make([]outbox.Message, 100)
				for i := range msgs {
					msgs[i] = msg
				}
				for b.Loop() {
					testkit.AddCommitted(b, db, o, msgs...)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(100*b.N), "ns/msg")
			})
		})
	}
}

// BenchmarkRelay measures a relay shipping b.N rows of 200 bytes that wait
// in the table, through a Sender that does nothing: what the table costs a
// relay, per message. It reports the database round trips, the test
// process's CPU and the database server's (its processes' together) per
// message.
func BenchmarkRelay(b *testing.B) {
	for _, be := range testdb.Backends {
		b.Run(be.Name, func(b *testing.B) {
			var h testdb.Hooks
			db := be.OpenWith(b, &h)
			o := newOutbox(b, db, be)
			msgs := make([]outbox.Message, 256)
			for i := range msgs {
				msgs[i] = outbox.Message{Topic: "orders", Body: body200, OrderingKey: fmt.Sprint("k", i%64)}
			}
			for left := b.N; left > 0; left -= len(msgs) {
				testkit.AddCommitted(b, db, o, msgs[:min(left, len(msgs))]...)
			}
			server := testkit.ServerCPU(b, be.Server(b))
			var server0 time.Duration
			if server != nil {
				server0 = server()
			}
			trips, self := h.RoundTrips(), testkit.OwnCPU(b)
			b.ResetTimer()
			r, err := outbox.NewRelay(o, senderFunc(func(context.Context, *outbox.Message) error { return nil }),
				outbox.RelayConfig{Batch: 256, Delete: true, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			for {
				if st := r.Stats(); st.Shipped >= int64(b.N) {
					break
				}
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			r.Close()
			n := float64(b.N)
			b.ReportMetric(n/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(float64(h.RoundTrips()-trips)/n, "trips/msg")
			b.ReportMetric(float64((testkit.OwnCPU(b)-self).Microseconds())/n, "test-µs/msg")
			if server != nil {
				b.ReportMetric(float64((server()-server0).Microseconds())/n, "db-µs/msg")
			}
		})
	}
}
