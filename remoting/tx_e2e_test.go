package remoting_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/remoting"
)

// TestEndToEndTxEachRowCommittedOnce runs endToEnd with transactional
// consumers (Consumer.Tx) over MariaDB: the effect is
// a row written in the transaction whose first statement claimed the key,
// after which the ledger's handler fails some keys once, rolling their row
// back with the key. Each consumer opens its own pool and store,
// as a process of its own would. The table must end with one row per
// message. (In a child process: see inChild.)
func TestEndToEndTxEachRowCommittedOnce(t *testing.T) {
	if !inChild(t, broker4, "IDEMQ_MYSQL_DSN="+testenv.MySQL(t)) {
		return
	}
	dsn := testenv.MySQL(t)
	admin := testdb.MySQL.OpenDSN(t, dsn)
	if _, err := admin.ExecContext(t.Context(), "CREATE TABLE applied (k VARCHAR(255) NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	migrated, err := sqldedupe.New(admin, dialect.MySQL, sqldedupe.Config{CleanupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer migrated.Close()
	if err := migrated.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}

	var (
		mu   sync.Mutex
		keys = map[string]bool{} // every key a handler saw
	)
	endToEnd(t, broker4, func(group string) (*consumer.Consumer, func(consumer.Handler) callback, error) {
		db := testdb.MySQL.OpenDSN(t, dsn)
		store, err := sqldedupe.New(db, dialect.MySQL, sqldedupe.Config{})
		if err != nil {
			return nil, nil, err
		}
		t.Cleanup(func() { store.Close() })
		c, err := consumer.New(store, group)
		if err != nil {
			return nil, nil, err
		}
		return c, func(h consumer.Handler) callback {
			pay, err := c.Tx(func(ctx context.Context, tx *sql.Tx, m *consumer.Message) error {
				k := msgkey.Of(m)
				mu.Lock()
				keys[k] = true
				mu.Unlock()
				if _, err := tx.ExecContext(ctx, "INSERT INTO applied (k) VALUES (?)", k); err != nil {
					return err
				}
				return h(ctx, m)
			})
			if err != nil {
				t.Fatal(err)
			}
			return remoting.Concurrently(c, pay)
		}, nil
	})

	committed := testkit.CountBy(t, admin, "SELECT k, COUNT(*) FROM applied GROUP BY k")
	mu.Lock()
	defer mu.Unlock()
	for k := range keys {
		if committed[k] != 1 {
			t.Errorf("key %s committed %d times, want 1", k, committed[k])
		}
	}
	if len(committed) != len(keys) {
		t.Errorf("%d keys committed, want the %d handled", len(committed), len(keys))
	}
}
