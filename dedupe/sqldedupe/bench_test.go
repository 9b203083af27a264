package sqldedupe_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/internal/sqldialect"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testkit"
)

// naiveSQL is the check-then-insert most hand-written dedupe does, two round
// trips per message and no lease: a SELECT for the key, then an INSERT of a
// done record into the same table. It is the baseline the Store's one
// statement per batch is measured against.
var naiveSQL = map[dialect.Dialect][2]string{
	dialect.MySQL: {
		"SELECT state FROM idemq_dedupe WHERE namespace = ? AND grp = ? AND k = ?",
		`INSERT INTO idemq_dedupe (namespace, grp, k, state, token, fingerprint, expires_at, created_at, updated_at)
VALUES (?, ?, ?, 'done', ?, '', UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`,
	},
	dialect.Postgres: {
		"SELECT state FROM idemq_dedupe WHERE namespace = $1 AND grp = $2 AND k = $3",
		`INSERT INTO idemq_dedupe (namespace, grp, k, state, token, fingerprint, expires_at, created_at, updated_at)
VALUES ($1, $2, $3, 'done', $4, '', now() + interval '1 hour', now(), now())`,
	},
	dialect.SQLite: {
		"SELECT state FROM idemq_dedupe WHERE namespace = ? AND grp = ? AND k = ?",
		`INSERT INTO idemq_dedupe (namespace, grp, k, state, token, fingerprint, expires_at, created_at, updated_at)
VALUES (?, ?, ?, 'done', ?, '', unixepoch() * 1000000 + 3600000000, unixepoch() * 1000000, unixepoch() * 1000000)`,
	},
}

// twoCommitSQL completes a claimed key inside the business transaction: the
// transactional mode before it claimed in that transaction (a Claim
// committed of its own, then BEGIN, the business INSERT, this, COMMIT),
// re-enacted as BenchmarkClaimTx's two-commit peer.
var twoCommitSQL = map[dialect.Dialect]string{
	dialect.MySQL: `UPDATE idemq_dedupe SET state = 'done', expires_at = UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, updated_at = UTC_TIMESTAMP(6)
WHERE namespace = ? AND grp = ? AND k = ? AND token = ?`,
	dialect.Postgres: `UPDATE idemq_dedupe SET state = 'done', expires_at = now() + interval '1 hour', updated_at = now()
WHERE namespace = $1 AND grp = $2 AND k = $3 AND token = $4`,
	dialect.SQLite: `UPDATE idemq_dedupe SET state = 'done', expires_at = expires_at + 3600000000
WHERE namespace = ? AND grp = ? AND k = ? AND token = ?`,
}

// ordersSQL creates and fills, one row per INSERT, the business table of
// the transactional benchmark.
func ordersSQL(d dialect.Dialect) (create, insert string) {
	return "CREATE TABLE bench_orders (id VARCHAR(64) PRIMARY KEY)",
		sqldialect.Of(d).Rebind("INSERT INTO bench_orders (id) VALUES (?)")
}

// BenchmarkClaimComplete measures whole messages: claim, then complete, with
// batches of 1 and 32, beside the naive baseline (the transactional mode is
// BenchmarkClaimTx's). msgs/s is the throughput of one consumer; stmts/msg
// counts the statements it sent.
func BenchmarkClaimComplete(b *testing.B) {
	for _, be := range testdb.Backends {
		b.Run(be.Name, func(b *testing.B) {
			h := &testdb.Hooks{}
			db := be.OpenWith(b, h)
			s := newStore(b, db, be.Dialect, sqldedupe.Config{})
			keys := &keySource{group: rand.Text()}

			for _, size := range []int{1, 32} {
				b.Run(fmt.Sprintf("idemq-batch=%d", size), func(b *testing.B) {
					measure(b, h, size, func(ctx context.Context) {
						if err := testkit.ClaimComplete(ctx, s, keys.next(size), make([]dedupe.Ticket, size), time.Minute, time.Hour); err != nil {
							b.Fatal(err)
						}
					})
				})
			}
			b.Run("naive", func(b *testing.B) {
				sel, ins := prepare(b, db, naiveSQL[be.Dialect][0]), prepare(b, db, naiveSQL[be.Dialect][1])
				measure(b, h, 1, func(ctx context.Context) {
					ref := keys.next(1)[0].Ref
					var state string
					err := sel.QueryRowContext(ctx, ref.Namespace, ref.Group, ref.Key).Scan(&state)
					if err != sql.ErrNoRows {
						b.Fatalf("naive select of a fresh key: %v", err)
					}
					if _, err := ins.ExecContext(ctx, ref.Namespace, ref.Group, ref.Key, rand.Text()); err != nil {
						b.Fatal(err)
					}
				})
			})
		})
	}
}

// BenchmarkClaimTx measures the transactional mode, one commit per
// message: BEGIN, the claim of the key in the transaction (Store.BeginTx,
// Store.ClaimTx), the business INSERT, COMMIT; against handlers without
// dedupe doing the same INSERT in autocommit (plain-insert: one statement,
// one commit) and in a transaction of their own (plain-tx: BEGIN, INSERT,
// COMMIT) and in one with a trivial statement more (four-trips: BEGIN,
// SELECT 1, INSERT, COMMIT: what a fourth round trip costs whatever it
// carries, as the claim cannot ride in BEGIN or COMMIT, which
// database/sql's drivers send as statements of their own), and against
// the path this mode replaced (two-commit: a Claim
// committed of its own, then BEGIN, the INSERT, the key completed,
// COMMIT), from 1 and 20 goroutines (SQLite, one writer at a time: 1).
// The three take turns in phases (see turns), so that the load of a shared
// machine falls on all alike: ns/op is ours per message, <peer>-ns/op the
// peers', which the bench table shows as ratios; cpu-µs/msg and db-µs/msg
// are the CPU this process and the database server spent per message
// (<peer>-cpu-µs/msg, <peer>-db-µs/msg the peers'); stmts/msg counts our
// statements, BEGIN and COMMIT aside. The pool keeps an idle connection per
// goroutine.
//
// The shared servers commit without syncing to disk (MariaDB
// innodb_flush_log_at_trx_commit=2, PostgreSQL fsync=off): there a
// message costs its round trips, and the mode's four (BEGIN, claim,
// INSERT, COMMIT) weigh against plain-insert's one. SQLite-durable is
// SQLite with synchronous=FULL, whose every commit syncs to disk, as a
// production database's does: there each variant costs its one commit.
func BenchmarkClaimTx(b *testing.B) {
	durable := testdb.SQLite
	durable.Name = "SQLite-durable"
	for _, be := range append(testdb.Backends, durable) {
		b.Run(be.Name, func(b *testing.B) {
			h := &testdb.Hooks{}
			db := be.OpenWith(b, h)
			db.SetMaxIdleConns(32)
			if be.Name == durable.Name {
				// One connection, so that the pragma holds for every
				// statement.
				db.SetMaxOpenConns(1)
				if _, err := db.Exec("PRAGMA synchronous = FULL"); err != nil {
					b.Fatal(err)
				}
			}
			s := newStore(b, db, be.Dialect, sqldedupe.Config{})
			server := testkit.ServerCPU(b, be.Server(b))
			create, insert := ordersSQL(be.Dialect)
			if _, err := db.Exec(create); err != nil {
				b.Fatal(err)
			}
			ins := prepare(b, db, insert)
			group := rand.Text()
			var next atomic.Int64 // the next unused key number
			idemq := func(ctx context.Context) error {
				ref := dedupe.Ref{Namespace: "bench", Group: group, Key: strconv.FormatInt(next.Add(1), 10)}
				tx, err := s.BeginTx(ctx)
				if err != nil {
					return err
				}
				defer tx.Rollback()
				res, err := s.ClaimTx(ctx, tx, dedupe.Item{Ref: ref}, time.Hour)
				if err != nil || res.Outcome != dedupe.Acquired {
					return fmt.Errorf("ClaimTx = %v, %v", res.Outcome, err)
				}
				if _, err := tx.StmtContext(ctx, ins).ExecContext(ctx, res.Token); err != nil {
					return err
				}
				return tx.Commit()
			}
			plainInsert := func(ctx context.Context) error {
				_, err := ins.ExecContext(ctx, rand.Text())
				return err
			}
			plainTx := func(ctx context.Context) error {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				defer tx.Rollback()
				if _, err := tx.StmtContext(ctx, ins).ExecContext(ctx, rand.Text()); err != nil {
					return err
				}
				return tx.Commit()
			}
			one := prepare(b, db, "SELECT 1")
			fourTrips := func(ctx context.Context) error {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				defer tx.Rollback()
				var n int
				if err := tx.StmtContext(ctx, one).QueryRowContext(ctx).Scan(&n); err != nil {
					return err
				}
				if _, err := tx.StmtContext(ctx, ins).ExecContext(ctx, rand.Text()); err != nil {
					return err
				}
				return tx.Commit()
			}
			complete := prepare(b, db, twoCommitSQL[be.Dialect])
			twoCommit := func(ctx context.Context) error {
				ref := dedupe.Ref{Namespace: "bench", Group: group, Key: strconv.FormatInt(next.Add(1), 10)}
				res, err := testkit.Claim(ctx, s, dedupe.Item{Ref: ref}, time.Minute)
				if err != nil || res.Outcome != dedupe.Acquired {
					return fmt.Errorf("Claim = %v, %v", res.Outcome, err)
				}
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				defer tx.Rollback()
				if _, err := tx.StmtContext(ctx, ins).ExecContext(ctx, res.Token); err != nil {
					return err
				}
				if n, err := affected(tx.StmtContext(ctx, complete).ExecContext(ctx, ref.Namespace, ref.Group, ref.Key, res.Token)); n != 1 || err != nil {
					return fmt.Errorf("complete in the transaction: %d rows, %v", n, err)
				}
				return tx.Commit()
			}
			gs := []int{1, 20}
			if be.Dialect == dialect.SQLite {
				gs = gs[:1]
			}
			for _, g := range gs {
				b.Run(fmt.Sprintf("goroutines=%d/idemq", g), func(b *testing.B) {
					turns(b, h, server, g, []namedOp{{"", idemq}, {"plain-insert", plainInsert}, {"plain-tx", plainTx}, {"four-trips", fourTrips}, {"two-commit", twoCommit}})
				})
			}
		})
	}
}

// namedOp is one message's work, named for its peer metric ("" for ours).
type namedOp struct {
	name string
	op   func(context.Context) error
}

// turns runs b.N messages of each of ops from g goroutines at a time, in
// phases of an eighth of b.N (at least 256) that take turns (whoever went
// first goes last next), and reports per message the wall time (ns/op and
// msgs/s for ops[0], <name>-ns/op for the others), the CPU of this process
// (cpu-µs/msg) and, with server, of the database's (db-µs/msg), and ops[0]'s
// statements.
func turns(b *testing.B, h *testdb.Hooks, server func() time.Duration, g int, ops []namedOp) {
	ctx := b.Context()
	spent, cpu, db := make([]time.Duration, len(ops)), make([]time.Duration, len(ops)), make([]time.Duration, len(ops))
	var stmts int64
	phase := max(b.N/8, min(b.N, 256))
	b.ResetTimer()
	for round, done := 0, 0; done < b.N; round++ {
		n := min(phase, b.N-done)
		for k := range ops {
			i := (round + k) % len(ops)
			before := h.Runs.Load()
			// The server's CPU is read from /proc, which costs this process
			// CPU too: outside the span its own CPU is read over.
			var db0 time.Duration
			if server != nil {
				db0 = server()
			}
			cpu0, start := testkit.OwnCPU(b), time.Now()
			var left atomic.Int64
			left.Store(int64(n))
			var wg sync.WaitGroup
			for range g {
				wg.Go(func() {
					for left.Add(-1) >= 0 {
						if err := ops[i].op(ctx); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			spent[i] += time.Since(start)
			cpu[i] += testkit.OwnCPU(b) - cpu0
			if server != nil {
				db[i] += server() - db0
			}
			if i == 0 {
				stmts += h.Runs.Load() - before
			}
		}
		done += n
	}
	b.StopTimer()
	perMsg := func(d time.Duration, unit float64) float64 { return float64(d) / unit / float64(b.N) }
	b.ReportMetric(perMsg(spent[0], 1), "ns/op")
	b.ReportMetric(1e9/perMsg(spent[0], 1), "msgs/s")
	for i, o := range ops {
		name := o.name
		if i > 0 {
			b.ReportMetric(perMsg(spent[i], 1), name+"-ns/op")
			name += "-"
		}
		b.ReportMetric(perMsg(cpu[i], float64(time.Microsecond)), name+"cpu-µs/msg")
		if server != nil {
			b.ReportMetric(perMsg(db[i], float64(time.Microsecond)), name+"db-µs/msg")
		}
	}
	b.ReportMetric(float64(stmts)/float64(b.N), "stmts/msg")
}

// affected returns the rows a statement changed.
func affected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// measure runs op, which handles msgs messages, in b.Loop and reports the
// message rate and the statements per message.
func measure(b *testing.B, h *testdb.Hooks, msgs int, op func(context.Context)) {
	ctx := context.Background()
	before := h.Runs.Load()
	n := 0
	for b.Loop() {
		op(ctx)
		n += msgs
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(h.Runs.Load()-before)/float64(n), "stmts/msg")
}

// keySource hands out fresh keys.
type keySource struct {
	group string
	n     int
}

func (k *keySource) next(n int) []dedupe.Item {
	reqs := make([]dedupe.Item, n)
	for i := range reqs {
		k.n++
		reqs[i] = dedupe.Item{Ref: dedupe.Ref{Namespace: "bench", Group: k.group, Key: fmt.Sprint(k.n)}}
	}
	return reqs
}

func prepare(b *testing.B, db *sql.DB, query string) *sql.Stmt {
	st, err := db.Prepare(query)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}
