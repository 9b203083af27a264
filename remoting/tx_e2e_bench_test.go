package remoting_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/internal/sqldialect"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/remoting"
)

// benchTxEndToEnd is BenchmarkEndToEnd's transactional rows on the database
// d: ns/op and msgs/s are a transactional Consumer (Consumer.Tx) over sqldedupe whose
// handler INSERTs one business row in the transaction that claimed the key
// (BEGIN, the claim, the INSERT, COMMIT: one commit per message);
// plain-insert is a handler doing the same INSERT without dedupe, in
// autocommit (one statement, one commit), and plain-tx one doing it in a
// transaction of its own (BEGIN, INSERT, COMMIT); two-commit re-enacts the
// path this mode replaced: a Claim committed of its own, then BEGIN, the
// INSERT, the key completed in the transaction, COMMIT (by hand, without a
// Consumer, whose path costs the same to every variant that has one, or
// its group commit, which coalesced those claims). Every variant INSERTs
// through one prepared statement on one pool, whose idle connections cover
// the callback goroutines. SQLite's pool has one connection, its one
// writer at a time: its writers queue in the pool rather than in SQLite's
// busy handler, which sleeps.
func benchTxEndToEnd(b *testing.B, ns, topic string, d testdb.Backend) {
	db := d.Open(b)
	db.SetMaxIdleConns(64) // every callback goroutine keeps its connection
	if d.Dialect == dialect.SQLite {
		db.SetMaxOpenConns(1)
	}
	store, err := sqldedupe.New(db, d.Dialect, sqldedupe.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	if err := store.Migrate(b.Context()); err != nil {
		b.Fatal(err)
	}
	if _, err := db.ExecContext(b.Context(), "CREATE TABLE bench_rows (grp VARCHAR(64) NOT NULL, k VARCHAR(64) NOT NULL, PRIMARY KEY (grp, k))"); err != nil {
		b.Fatal(err)
	}
	ins, err := db.Prepare(sqldialect.Of(d.Dialect).Rebind("INSERT INTO bench_rows (grp, k) VALUES (?, ?)"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ins.Close() })
	complete, err := db.Prepare(twoCommitSQL[d.Dialect])
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { complete.Close() })
	servers := map[string]string{}
	if addr := d.Server(b); addr != "" {
		servers["db"] = addr
	}
	e2eRun(b, ns, topic, 1, servers, []e2eVariant{
		{"idemq", func(group string) (callback, error) {
			c, err := consumer.New(store, group)
			if err != nil {
				return nil, err
			}
			h, err := c.Tx(func(ctx context.Context, tx *sql.Tx, m *consumer.Message) error {
				_, err := tx.StmtContext(ctx, ins).ExecContext(ctx, group, msgkey.Of(m))
				return err
			})
			if err != nil {
				return nil, err
			}
			return remoting.Concurrently(c, h), nil
		}},
		{"plain-insert", func(group string) (callback, error) {
			return func(ctx context.Context, msgs ...*primitive.MessageExt) (rmq.ConsumeResult, error) {
				for _, m := range msgs {
					if _, err := ins.ExecContext(ctx, group, msgkey.Of(m)); err != nil {
						return rmq.ConsumeRetryLater, err
					}
				}
				return rmq.ConsumeSuccess, nil
			}, nil
		}},
		{"two-commit", func(group string) (callback, error) {
			return func(ctx context.Context, msgs ...*primitive.MessageExt) (rmq.ConsumeResult, error) {
				for _, m := range msgs {
					if err := twoCommit(ctx, db, store, complete, ins, group, msgkey.Of(m)); err != nil {
						return rmq.ConsumeRetryLater, err
					}
				}
				return rmq.ConsumeSuccess, nil
			}, nil
		}},
		{"plain-tx", func(group string) (callback, error) {
			return func(ctx context.Context, msgs ...*primitive.MessageExt) (rmq.ConsumeResult, error) {
				for _, m := range msgs {
					if err := insertInTx(ctx, db, ins, group, msgkey.Of(m)); err != nil {
						return rmq.ConsumeRetryLater, err
					}
				}
				return rmq.ConsumeSuccess, nil
			}, nil
		}},
	})
}

// insertInTx runs ins with group and key in a transaction of its own.
func insertInTx(ctx context.Context, db *sql.DB, ins *sql.Stmt, group, key string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.StmtContext(ctx, ins).ExecContext(ctx, group, key); err != nil {
		return err
	}
	return tx.Commit()
}

// twoCommitSQL completes a claimed key inside the business transaction,
// for the two-commit peer.
var twoCommitSQL = map[sqldialect.Dialect]string{
	sqldialect.MySQL: `UPDATE idemq_dedupe SET state = 'done', expires_at = UTC_TIMESTAMP(6) + INTERVAL 72 HOUR, updated_at = UTC_TIMESTAMP(6)
WHERE namespace = ? AND grp = ? AND k = ? AND token = ?`,
	sqldialect.Postgres: `UPDATE idemq_dedupe SET state = 'done', expires_at = now() + interval '72 hours', updated_at = now()
WHERE namespace = $1 AND grp = $2 AND k = $3 AND token = $4`,
	sqldialect.SQLite: `UPDATE idemq_dedupe SET state = 'done', expires_at = expires_at + 259200000000
WHERE namespace = ? AND grp = ? AND k = ? AND token = ?`,
}

// twoCommit handles the message of key as the transactional mode did
// before it claimed in the business transaction.
func twoCommit(ctx context.Context, db *sql.DB, store *sqldedupe.Store, complete, ins *sql.Stmt, group, key string) error {
	ref := dedupe.Ref{Group: group, Key: key}
	res, err := testkit.Claim(ctx, store, dedupe.Item{Ref: ref}, 30*time.Second)
	if err != nil || res.Outcome != dedupe.Acquired {
		return fmt.Errorf("claim %s: %v, %v", key, res.Outcome, err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.StmtContext(ctx, ins).ExecContext(ctx, group, key); err != nil {
		return err
	}
	if _, err := tx.StmtContext(ctx, complete).ExecContext(ctx, ref.Namespace, ref.Group, ref.Key, res.Token); err != nil {
		return err
	}
	return tx.Commit()
}
