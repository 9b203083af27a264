package pgwake_test

import (
	"context"
	"strings"
	"testing"

	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/outbox"
	"github.com/idemq/idemq/outbox/pgwake"
)

// BenchmarkAdd measures what the trigger adds to a business transaction
// that adds one message of 200 bytes (BEGIN, INSERT, COMMIT) on PostgreSQL:
// idemq-outbox has no trigger, idemq-outbox-notify has Install's, with no
// listener (a listener does not slow the writer).
func BenchmarkAdd(b *testing.B) {
	ctx := context.Background()
	msg := outbox.Message{Topic: "orders", Body: []byte(strings.Repeat("x", 200))}
	for _, notify := range []bool{false, true} {
		name := "idemq-outbox"
		if notify {
			name += "-notify"
		}
		b.Run(name, func(b *testing.B) {
			db := testdb.Postgres.Open(b)
			o, err := outbox.New(db, dialect.Postgres, testkit.Keys(b, 1), outbox.Config{})
			if err != nil {
				b.Fatal(err)
			}
			if err := o.Migrate(ctx); err != nil {
				b.Fatal(err)
			}
			if notify {
				if err := pgwake.Install(ctx, db, outbox.DefaultTable); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := o.Add(ctx, tx, msg); err != nil {
					b.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
