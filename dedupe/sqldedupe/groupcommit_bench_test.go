package sqldedupe_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testkit"
)

// BenchmarkGroupCommit measures the per-message path of a push consumer —
// a Guard claims one message, then completes it — from 1 and from 20
// handler goroutines on MySQL and PostgreSQL: with GuardConfig.GroupCommit,
// which coalesces the goroutines' claims and completions into shared
// statements; without; and through the naive SELECT-then-INSERT of
// BenchmarkClaimComplete. Each reports msgs/s and
// the statements sent per message; compare them within one run and one
// goroutine count. The pool keeps an idle connection per goroutine, so
// that the naive baseline does not reconnect (database/sql keeps two).
func BenchmarkGroupCommit(b *testing.B) {
	for _, be := range testdb.Backends {
		if be.Dialect == dialect.SQLite {
			continue // one writer at a time: nothing to run in parallel
		}
		b.Run(be.Name, func(b *testing.B) {
			h := &testdb.Hooks{}
			db := be.OpenWith(b, h)
			db.SetMaxIdleConns(32)
			s := newStore(b, db, be.Dialect, sqldedupe.Config{})
			grouped, alone := benchGuard(b, s, true), benchGuard(b, s, false)
			sel, ins := prepare(b, db, naiveSQL[be.Dialect][0]), prepare(b, db, naiveSQL[be.Dialect][1])
			group := rand.Text()
			var next atomic.Int64 // the next unused key number
			fresh := func() dedupe.Ref {
				return dedupe.Ref{Namespace: "bench", Group: group, Key: strconv.FormatInt(next.Add(1), 10)}
			}
			for _, n := range []int{1, 20} {
				b.Run(fmt.Sprintf("goroutines=%d/idemq-groupcommit", n), func(b *testing.B) {
					measureGoroutines(b, h, n, func(ctx context.Context) error { return message(ctx, grouped, fresh()) })
				})
				b.Run(fmt.Sprintf("goroutines=%d/idemq", n), func(b *testing.B) {
					measureGoroutines(b, h, n, func(ctx context.Context) error { return message(ctx, alone, fresh()) })
				})
				b.Run(fmt.Sprintf("goroutines=%d/naive", n), func(b *testing.B) {
					measureGoroutines(b, h, n, func(ctx context.Context) error { return naiveMessage(ctx, sel, ins, fresh()) })
				})
			}
		})
	}
}

// benchGuard returns a Guard over s, its calls coalesced or not.
func benchGuard(b *testing.B, s dedupe.Store, groupCommit bool) *dedupe.Guard {
	g, err := dedupe.NewGuard(s, dedupe.GuardConfig{Lease: time.Minute, Retention: time.Hour, GroupCommit: groupCommit})
	if err != nil {
		b.Fatal(err)
	}
	return g
}

// message handles ref through g: a claim, then a completion.
func message(ctx context.Context, g *dedupe.Guard, ref dedupe.Ref) error {
	if r := g.Do(ctx, []dedupe.Item{{Ref: ref}}, func(context.Context, int) error { return nil })[0]; r.Outcome != dedupe.Completed {
		return fmt.Errorf("Do = %v, %v", r.Outcome, r.Err)
	}
	return nil
}

// naiveMessage checks that ref has no record and inserts a done one.
func naiveMessage(ctx context.Context, sel, ins *sql.Stmt, ref dedupe.Ref) error {
	var state string
	if err := sel.QueryRowContext(ctx, ref.Namespace, ref.Group, ref.Key).Scan(&state); err != sql.ErrNoRows {
		return fmt.Errorf("naive select of a fresh key: %v", err)
	}
	_, err := ins.ExecContext(ctx, ref.Namespace, ref.Group, ref.Key, rand.Text())
	return err
}

// measureGoroutines runs op, which handles one message, b.N times from n
// goroutines and reports the message rate and the statements per message.
func measureGoroutines(b *testing.B, h *testdb.Hooks, n int, op func(context.Context) error) {
	ctx := b.Context()
	before := h.Runs.Load()
	var msgs atomic.Int64
	one := func() {
		if err := op(ctx); err != nil {
			b.Error(err)
		}
		msgs.Add(1)
	}
	testkit.Goroutines(b, n, one)
	b.ReportMetric(float64(msgs.Load())/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(h.Runs.Load()-before)/float64(msgs.Load()), "stmts/msg")
}
