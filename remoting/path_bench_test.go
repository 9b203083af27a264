package remoting_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/remoting"
)

// pathBody is the body of the benchmarks' messages: 200 bytes, as in the
// end-to-end measurements of notes/perf.md.
var pathBody = bytes.Repeat([]byte("0123456789"), 20)

// pathGoroutines are the callback goroutines: one, and the push consumer's
// default ConsumeGoroutineNums.
var pathGoroutines = []int{1, 20}

// pathRetention is the retention on Redis and memdedupe, for both sides.
const pathRetention = 5 * time.Second

// naiveLease is the naive Redis consumer's claim expiry, the Guard's default
// lease.
const naiveLease = 30 * time.Second

func goroutinesName(g int) string {
	if g == 1 {
		return "serial"
	}
	return fmt.Sprintf("goroutines=%d", g)
}

func noopHandler(context.Context, *consumer.Message) error { return nil }

// noopRaw is noopHandler for the naive consumers, which hand the handler
// the client's message.
func noopRaw(context.Context, *primitive.MessageExt) error { return nil }

// pathOptions are the Consumer's options in the benchmarks.
func pathOptions(retention time.Duration) []consumer.Option {
	opts := []consumer.Option{consumer.WithLogger(slog.New(slog.DiscardHandler))}
	if retention > 0 {
		// Short on purpose, so that a long run's records expire.
		opts = append(opts, consumer.WithGuard(dedupe.GuardConfig{Retention: retention}), consumer.AcceptShortRetention())
	}
	return opts
}

// A deliverer handles one message; nil means it was acknowledged.
type deliverer func(ctx context.Context, m *primitive.MessageExt) error

// viaCallback delivers through cb, one message per call.
func viaCallback(cb callback) deliverer {
	return func(ctx context.Context, m *primitive.MessageExt) error {
		if res, err := cb(ctx, m); res != rmq.ConsumeSuccess || err != nil {
			return fmt.Errorf("callback = %v, %v", res, err)
		}
		return nil
	}
}

// BenchmarkPath measures the per-message path, what a push consumer with
// default settings runs: one fresh message per callback, from one goroutine
// and from 20 (the client's default ConsumeGoroutineNums), through
// Consumer.Concurrently with default options and a handler that does
// nothing (Consumer.Tx with one INSERT in the tx- rows), against a
// hand-written naive consumer on the same server and client. ns/op and
// msgs/s are ours per message, naive-ns/op the naive consumer's, which the
// bench table shows as a peer row and a ratio; allocs/msg and B/msg are
// ours alone (B/op and allocs/op cover both). The two take turns in phases,
// an eighth of the run each (at least 256 messages), so that the load of a shared machine falls on
// both alike. memdedupe has no naive peer: its rows are the path's own cost
// and allocations without a network.
//
// Options: the defaults, except a retention of 5s on Redis and memdedupe,
// so that a long run's records expire instead of filling memory (the naive
// consumer keeps its records as long), and a logger that discards.
func BenchmarkPath(b *testing.B) {
	b.Run("Redis", benchPathRedis)
	// SQLite's transactions begin deferred: one takes the database's
	// write lock at its first statement, the claim.
	for _, d := range []testdb.Backend{testdb.SQLiteDeferred, testdb.MySQL, testdb.Postgres} {
		b.Run(d.Name, func(b *testing.B) { benchPathSQL(b, d) })
	}
	b.Run("memdedupe", benchPathMem)
}

// benchPathRedis compares the consumer over redisdedupe with the naive
// consumer: SET NX to claim, the handler, SET to mark done, on the same
// Redis and go-redis client. trips/msg counts the store round trips of ours.
func benchPathRedis(b *testing.B) {
	store, rdb := newRedisStore(b, fmt.Sprintf("benchpath:%d-%d:", os.Getpid(), time.Now().UnixNano()))
	for _, g := range pathGoroutines {
		b.Run(goroutinesName(g)+"/idemq", func(b *testing.B) {
			trips := &testkit.TripCounter{CompleteClaimer: store}
			c, err := consumer.New(trips, "bench-"+rand.Text(), pathOptions(pathRetention)...)
			if err != nil {
				b.Fatal(err)
			}
			naive := func(ctx context.Context, m *primitive.MessageExt) error {
				key := "naive:" + msgkey.Of(m)
				ok, err := rdb.SetNX(ctx, key, "processing", naiveLease).Result()
				if err != nil || !ok {
					return fmt.Errorf("SET NX = %v, %v", ok, err)
				}
				if err := noopRaw(ctx, m); err != nil {
					rdb.Del(ctx, key)
					return err
				}
				return rdb.Set(ctx, key, "done", pathRetention).Err()
			}
			n := paired(b, g, viaCallback(remoting.Concurrently(c, noopHandler)), naive)
			b.ReportMetric(float64(trips.Trips())/float64(n), "trips/msg")
		})
	}
}

// naivePathSQL is the check-then-insert of hand-written SQL dedupe (the
// naive baseline of package sqldedupe's benchmarks): SELECT the key, run the
// handler, INSERT a done record into the same table. Its transactional form
// does the same, with the business row, in one transaction.
var naivePathSQL = map[dialect.Dialect]struct{ sel, ins, business string }{
	dialect.MySQL: {
		"SELECT state FROM idemq_dedupe WHERE namespace = ? AND grp = ? AND k = ?",
		`INSERT INTO idemq_dedupe (namespace, grp, k, state, token, fingerprint, expires_at, created_at, updated_at)
VALUES (?, ?, ?, 'done', ?, '', UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`,
		"INSERT INTO bench_orders (id) VALUES (?)",
	},
	dialect.Postgres: {
		"SELECT state FROM idemq_dedupe WHERE namespace = $1 AND grp = $2 AND k = $3",
		`INSERT INTO idemq_dedupe (namespace, grp, k, state, token, fingerprint, expires_at, created_at, updated_at)
VALUES ($1, $2, $3, 'done', $4, '', now() + interval '1 hour', now(), now())`,
		"INSERT INTO bench_orders (id) VALUES ($1)",
	},
	dialect.SQLite: {
		"SELECT state FROM idemq_dedupe WHERE namespace = ? AND grp = ? AND k = ?",
		`INSERT INTO idemq_dedupe (namespace, grp, k, state, token, fingerprint, expires_at, created_at, updated_at)
VALUES (?, ?, ?, 'done', ?, '', unixepoch() * 1000000 + 3600000000, unixepoch() * 1000000, unixepoch() * 1000000)`,
		"INSERT INTO bench_orders (id) VALUES (?)",
	},
}

// benchPathSQL compares the consumer over sqldedupe with the naive
// check-then-insert, and the transactional mode (Consumer.Tx, whose handler
// INSERTs a business row) with a naive exactly-once transaction: BEGIN,
// SELECT the key, INSERT the business row, INSERT the done record, COMMIT.
// Both sides use one pool, whose idle connections cover every goroutine
// (database/sql keeps 2 by default, and would reconnect per message), and
// prepared statements.
func benchPathSQL(b *testing.B, d testdb.Backend) {
	db := d.Open(b)
	db.SetMaxIdleConns(64)
	store, err := sqldedupe.New(db, d.Dialect, sqldedupe.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	if err := store.Migrate(b.Context()); err != nil {
		b.Fatal(err)
	}
	if _, err := db.ExecContext(b.Context(), "CREATE TABLE bench_orders (id VARCHAR(64) PRIMARY KEY)"); err != nil {
		b.Fatal(err)
	}
	naiveSQL := naivePathSQL[d.Dialect]
	prep := func(q string) *sql.Stmt {
		st, err := db.Prepare(q)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		return st
	}
	sel, ins, business := prep(naiveSQL.sel), prep(naiveSQL.ins), prep(naiveSQL.business)
	const naiveNS = "naive"

	gs := pathGoroutines
	if d.Dialect == dialect.SQLite {
		// One writer at a time: more goroutines only queue, and the naive
		// transaction's SELECT-then-INSERT fails with SQLITE_BUSY when
		// another writer commits between the two.
		gs = []int{1}
	}
	for _, g := range gs {
		b.Run(goroutinesName(g)+"/idemq", func(b *testing.B) {
			group := "bench-" + rand.Text()
			c, err := consumer.New(store, group, pathOptions(0)...)
			if err != nil {
				b.Fatal(err)
			}
			naive := func(ctx context.Context, m *primitive.MessageExt) error {
				key := msgkey.Of(m)
				var state string
				if err := sel.QueryRowContext(ctx, naiveNS, group, key).Scan(&state); !errors.Is(err, sql.ErrNoRows) {
					return fmt.Errorf("naive select of a fresh key: %v", err)
				}
				if err := noopRaw(ctx, m); err != nil {
					return err
				}
				_, err := ins.ExecContext(ctx, naiveNS, group, key, rand.Text())
				return err
			}
			paired(b, g, viaCallback(remoting.Concurrently(c, noopHandler)), naive)
		})
	}
	for _, g := range gs {
		b.Run("tx-"+goroutinesName(g)+"/idemq", func(b *testing.B) {
			group := "bench-" + rand.Text()
			c, err := consumer.New(store, group, pathOptions(0)...)
			if err != nil {
				b.Fatal(err)
			}
			h, err := c.Tx(func(ctx context.Context, tx *sql.Tx, m *consumer.Message) error {
				_, err := tx.StmtContext(ctx, business).ExecContext(ctx, msgkey.Of(m))
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			naive := func(ctx context.Context, m *primitive.MessageExt) error {
				key := msgkey.Of(m)
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				defer tx.Rollback()
				var state string
				if err := tx.StmtContext(ctx, sel).QueryRowContext(ctx, naiveNS, group, key).Scan(&state); !errors.Is(err, sql.ErrNoRows) {
					return fmt.Errorf("naive select of a fresh key: %v", err)
				}
				if _, err := tx.StmtContext(ctx, business).ExecContext(ctx, key); err != nil {
					return err
				}
				if _, err := tx.StmtContext(ctx, ins).ExecContext(ctx, naiveNS, group, key, rand.Text()); err != nil {
					return err
				}
				return tx.Commit()
			}
			paired(b, g, viaCallback(remoting.Concurrently(c, h)), naive)
		})
	}
}

// benchPathMem measures the consumer over memdedupe alone, with its
// allocations: the cost of the path itself, without a network; against a
// bare callback that hands each message to the handler as it is and
// answers ConsumeSuccess, the least a callback does. The path's own cost
// is the difference.
func benchPathMem(b *testing.B) {
	keys := pathKeys()
	for _, g := range pathGoroutines {
		b.Run(goroutinesName(g)+"/bare", func(b *testing.B) {
			var next atomic.Uint64
			cb := func(ctx context.Context, exts ...*primitive.MessageExt) (rmq.ConsumeResult, error) {
				for _, m := range exts {
					if err := noopRaw(ctx, m); err != nil {
						return rmq.ConsumeRetryLater, err
					}
				}
				return rmq.ConsumeSuccess, nil
			}
			one := func(m *primitive.MessageExt) {
				n := next.Add(1) - 1
				m.WithProperty(msgkey.Property, keys[n%uint64(len(keys))])
				if res, err := cb(context.Background(), m); res != rmq.ConsumeSuccess || err != nil {
					b.Errorf("callback = %v, %v", res, err)
				}
			}
			benchLoop(b, g, one)
			b.ReportMetric(float64(next.Load())/b.Elapsed().Seconds(), "msgs/s")
		})
		b.Run(goroutinesName(g)+"/idemq", func(b *testing.B) {
			var (
				next atomic.Uint64
				cur  atomic.Pointer[lapCallback]
				mu   sync.Mutex
			)
			// callback returns the callback for key number n: that of a
			// new Consumer, of a new group, each time the keys come round.
			callback := func(n uint64) callback {
				lap := n / uint64(len(keys))
				if l := cur.Load(); l != nil && l.lap >= lap {
					return l.cb
				}
				mu.Lock()
				defer mu.Unlock()
				if l := cur.Load(); l != nil && l.lap >= lap {
					return l.cb
				}
				c, err := consumer.New(memdedupe.New(memdedupe.Config{}), "bench-"+rand.Text(), pathOptions(pathRetention)...)
				if err != nil {
					panic(err)
				}
				l := &lapCallback{lap: lap, cb: remoting.Concurrently(c, noopHandler)}
				cur.Store(l)
				return l.cb
			}
			callback(0)
			one := func(m *primitive.MessageExt) {
				n := next.Add(1) - 1
				m.WithProperty(msgkey.Property, keys[n%uint64(len(keys))])
				if res, err := callback(n)(context.Background(), m); res != rmq.ConsumeSuccess || err != nil {
					b.Errorf("callback = %v, %v", res, err)
				}
			}
			benchLoop(b, g, one)
			b.ReportMetric(float64(next.Load())/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// benchLoop delivers one message per op to one, from g goroutines.
func benchLoop(b *testing.B, g int, one func(*primitive.MessageExt)) {
	b.ReportAllocs()
	if g == 1 {
		m := pathMsg()
		for b.Loop() {
			one(m)
		}
		return
	}
	b.SetParallelism((g + 1) / 2) // of GOMAXPROCS, 2 here
	b.RunParallel(func(pb *testing.PB) {
		m := pathMsg()
		for pb.Next() {
			one(m)
		}
	})
}

// lapCallback is the callback of one lap of pathKeys.
type lapCallback struct {
	lap uint64
	cb  callback
}

// pathKeys are message keys, built once, so that giving a message a fresh
// one allocates nothing.
var pathKeys = sync.OnceValue(func() []string {
	keys := make([]string, 1<<20)
	for i := range keys {
		keys[i] = "order-" + strconv.Itoa(i)
	}
	return keys
})

// pathMsg returns a message of pathBody whose key is set by the caller.
func pathMsg() *primitive.MessageExt {
	m := &primitive.MessageExt{MsgId: "bench"}
	m.Topic, m.Body = "orders", pathBody
	m.WithProperty(msgkey.Property, "")
	return m
}

// paired delivers b.N fresh messages to ours and b.N to naive, from g
// goroutines at a time, in alternating phases (whichever went second goes
// first next), and reports each one's wall time per message: ns/op for ours,
// naive-ns/op for naive, and ours' msgs/s. B/op and allocs/op cover both;
// allocs/msg and B/msg are ours alone. It returns b.N.
func paired(b *testing.B, g int, ours, naive deliverer) int {
	ctx := context.Background()
	run := rand.Text()[:8] // fresh keys for every run of b's function
	sides := [2]struct {
		d              deliverer
		key            string
		spent          time.Duration
		next           int
		allocs, allocB uint64
	}{{d: ours, key: run + "-o"}, {d: naive, key: run + "-n"}}
	phase := max(b.N/8, min(b.N, 256))
	var before, after runtime.MemStats
	b.ResetTimer()
	for round, done := 0, 0; done < b.N; round++ {
		n := min(phase, b.N-done)
		for k := range 2 {
			s := &sides[(round+k)%2]
			runtime.ReadMemStats(&before)
			elapsed, err := deliverAll(ctx, g, s.d, s.key, s.next, n)
			runtime.ReadMemStats(&after)
			if err != nil {
				b.Fatal(err)
			}
			s.spent += elapsed
			s.next += n
			s.allocs += after.Mallocs - before.Mallocs
			s.allocB += after.TotalAlloc - before.TotalAlloc
		}
		done += n
	}
	b.StopTimer()
	ns := float64(sides[0].spent.Nanoseconds()) / float64(b.N)
	b.ReportMetric(ns, "ns/op")
	b.ReportMetric(float64(sides[1].spent.Nanoseconds())/float64(b.N), "naive-ns/op")
	b.ReportMetric(1e9/ns, "msgs/s")
	b.ReportMetric(float64(sides[0].allocs)/float64(b.N), "allocs/msg")
	b.ReportMetric(float64(sides[0].allocB)/float64(b.N), "B/msg")
	return b.N
}

// deliverAll delivers messages first to first+n-1, keyed prefix+number, to
// d from g goroutines, and returns the wall time it took and the first
// error.
func deliverAll(ctx context.Context, g int, d deliverer, prefix string, first, n int) (time.Duration, error) {
	var (
		next     atomic.Int64
		errMu    sync.Mutex
		firstErr error
	)
	next.Store(int64(first))
	end := int64(first + n)
	work := func() {
		m := pathMsg()
		for {
			i := next.Add(1) - 1
			if i >= end {
				return
			}
			m.WithProperty(msgkey.Property, prefix+strconv.FormatInt(i, 10))
			if err := d(ctx, m); err != nil {
				errMu.Lock()
				firstErr = cmp.Or(firstErr, err)
				errMu.Unlock()
				return
			}
		}
	}
	start := time.Now()
	if g == 1 {
		work()
	} else {
		var wg sync.WaitGroup
		for range g {
			wg.Go(work)
		}
		wg.Wait()
	}
	return time.Since(start), firstErr
}
