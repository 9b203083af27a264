package outbox_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemq/idemq/internal/sqldialect"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/outbox"
)

// orderedMessages returns n messages spread over keys ordering keys, each
// body "<key>/<i>" with i counting up within its key.
func orderedMessages(n, keys int) []outbox.Message {
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		k := fmt.Sprintf("key%d", i%keys)
		msgs[i] = outbox.Message{Topic: "orders", OrderingKey: k, Body: fmt.Appendf(nil, "%s/%d", k, i/keys)}
	}
	return msgs
}

// checkOrder fails t unless got holds every one of n ordered messages
// (orderedMessages) exactly once and each key's in order.
func checkOrder(t *testing.T, got []outbox.Message, n, keys int) {
	t.Helper()
	next := map[string]int{}
	for _, m := range got {
		k, i, _ := strings.Cut(string(m.Body), "/")
		if want := fmt.Sprint(next[k]); i != want {
			t.Fatalf("%s: shipped %s/%s when %s/%s was next", m.OrderingKey, k, i, k, want)
		}
		next[k]++
	}
	if len(got) != n {
		t.Fatalf("shipped %d messages, want %d", len(got), n)
	}
}

// TestFailureHoldsBackItsKeyOnly fails the first sends of one row: the
// later rows of its key wait for it, other keys flow meanwhile, and every
// key ships in order. Sent in batches, the rows of its key sharing its
// batch wait for it too.
func TestFailureHoldsBackItsKeyOnly(t *testing.T) {
	forEachSender(t, func(t *testing.T, e env, wrap func(*recorder) outbox.Sender) {
		const n, keys = 60, 3
		var (
			mu       sync.Mutex
			failures int
			release  = make(chan struct{})
		)
		rec := &recorder{fail: func(m *outbox.Message) error {
			if string(m.Body) != "key0/2" {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			select {
			case <-release:
				return nil
			default:
				failures++
				return errBroker
			}
		}}
		testkit.AddCommitted(t, e.db, e.o, orderedMessages(n, keys)...)
		s := wrap(rec)
		r := newRelay(t, e.o, s, outbox.RelayConfig{Batch: 7, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
		// While key0/2 fails, keys 1 and 2 ship whole, key0 up to it (sent
		// alone) or up to the start of its batch.
		want := int64(n - (n/keys - 2))
		if _, ok := s.(outbox.BatchSender); ok {
			want = n - n/keys
		}
		waitStats(t, e.o, "the other keys shipped", func(s outbox.Counts) bool { return s.Sent >= want })
		if st, err := e.o.Count(t.Context()); err != nil || st.Sent > n-(n/keys-2) {
			t.Fatalf("stats %+v (%v): key0/2 or a later row of key0 shipped while it failed", st, err)
		}
		close(release)
		waitStats(t, e.o, "all shipped", func(s outbox.Counts) bool { return s.Sent == n })
		r.Close()
		checkOrder(t, rec.sent(), n, keys)
		if st := r.Stats(); st.Retried == 0 || int(st.Retried) != failures || st.Shipped != n {
			t.Errorf("relay stats %+v after %d failures", st, failures)
		}
	})
}

// TestRowsParked fails some rows for good, each case its way: a row the
// broker refuses is parked at once with its reason; a row that keeps
// failing, refused or not, is parked once out of attempts (MaxAttempts).
// Each parked row is counted, its reason kept, and every other row ships
// once. Sent in batches, a refused batch is sent again row by row, and the
// rows sharing a failing row's batch are charged an attempt each, then
// sent alone, so that only the row that fails runs out.
func TestRowsParked(t *testing.T) {
	refused := fmt.Errorf("CODE: 13 body too large: %w", outbox.ErrRefused)
	unordered := make([]outbox.Message, 150) // of two topics, sent in batches by topic
	for i := range unordered {
		unordered[i] = outbox.Message{Topic: fmt.Sprint("t", i%2), Body: fmt.Appendf(nil, "m%d", i)}
	}
	withFree := orderedMessages(30, 3)
	for i := range 10 {
		withFree = append(withFree, outbox.Message{Topic: "orders", Body: fmt.Appendf(nil, "free/%d", i)})
	}
	backoff := outbox.RelayConfig{MaxAttempts: 3, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
	for _, tc := range []struct {
		name   string
		msgs   []outbox.Message
		fail   map[string]error // by body
		cfg    outbox.RelayConfig
		reason string // in every parked row's last error
	}{
		// The rows after it, of its key and others, ship.
		{"Refused", orderedMessages(12, 3), map[string]error{"key1/1": refused}, outbox.RelayConfig{}, "CODE: 13"},
		{"RefusedAmongUnordered", unordered, map[string]error{"m77": refused}, outbox.RelayConfig{Batch: 200}, "CODE: 13"},
		// Neither refused: of an ordering key, and without one.
		{"OutOfAttempts", withFree, map[string]error{"key0/2": errBroker, "free/4": errBroker}, backoff, errBroker.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachSender(t, func(t *testing.T, e env, wrap func(*recorder) outbox.Sender) {
				rec := &recorder{fail: func(m *outbox.Message) error { return tc.fail[string(m.Body)] }}
				testkit.AddCommitted(t, e.db, e.o, tc.msgs...)
				r := newRelay(t, e.o, wrap(rec), tc.cfg)
				s := waitStats(t, e.o, "the failing rows parked", func(s outbox.Counts) bool { return s.Pending == 0 })
				r.Close()
				parked, sent := int64(len(tc.fail)), int64(len(tc.msgs)-len(tc.fail))
				if s.Parked != parked || s.Sent != sent {
					t.Fatalf("stats %+v: want %d parked, %d sent", s, parked, sent)
				}
				if st := r.Stats(); st.Parked != parked || st.Shipped != sent || tc.name == "Refused" && st.Retried != 0 {
					t.Errorf("relay stats %+v", st)
				}
				seen := map[string]bool{}
				for _, m := range rec.sent() {
					if b := string(m.Body); seen[b] || tc.fail[b] != nil {
						t.Fatalf("%s sent twice, or a failing row shipped", b)
					}
					seen[string(m.Body)] = true
				}
				if int64(len(seen)) != sent {
					t.Errorf("sent %d rows, want %d", len(seen), sent)
				}
				rows, err := e.o.List(t.Context(), outbox.Parked, 0, 10)
				if err != nil || int64(len(rows)) != parked {
					t.Fatalf("List parked: %+v, %v", rows, err)
				}
				for _, row := range rows {
					if !strings.Contains(row.LastError, tc.reason) {
						t.Errorf("parked with reason %q, want %q in it", row.LastError, tc.reason)
					}
				}
			})
		})
	}
}

// TestRelaysShareTable runs three relays over one table: every row ships
// once, each key in order, and no row is sent by two relays at once.
func TestRelaysShareTable(t *testing.T) {
	forEachSender(t, func(t *testing.T, e env, wrap func(*recorder) outbox.Sender) {
		const n, keys = 240, 12
		rec := new(recorder)
		s := wrap(rec)
		testkit.AddCommitted(t, e.db, e.o, orderedMessages(n/2, keys)...)
		var relays []*outbox.Relay
		for range 3 {
			relays = append(relays, newRelay(t, e.reopen(t), s, outbox.RelayConfig{Batch: 16, Concurrency: 4}))
		}
		testkit.AddCommitted(t, e.db, e.o, orderedMessages(n, keys)[n/2:]...)
		waitStats(t, e.o, "all shipped", func(s outbox.Counts) bool { return s.Sent == n })
		for _, r := range relays {
			r.Close()
		}
		checkOrder(t, rec.sent(), n, keys)
		if len(rec.overlap) > 0 {
			t.Errorf("sent while another send ran: %v", rec.overlap)
		}
	})
}

// TestDelayHoldsRowBack adds a row delayed by an hour: it stays pending,
// and holds back the later rows of its key, while other rows ship.
func TestDelayHoldsRowBack(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e env) {
		testkit.AddCommitted(t, e.db, e.o,
			outbox.Message{Topic: "t", Body: []byte("later"), OrderingKey: "a", Delay: time.Hour},
			outbox.Message{Topic: "t", Body: []byte("behind"), OrderingKey: "a"},
			outbox.Message{Topic: "t", Body: []byte("now"), OrderingKey: "b"},
			outbox.Message{Topic: "t", Body: []byte("unordered")})
		rec := new(recorder)
		r := newRelay(t, e.o, rec, outbox.RelayConfig{})
		s := waitStats(t, e.o, "two sent", func(s outbox.Counts) bool { return s.Sent == 2 })
		r.Close()
		if s.Pending != 2 || rec.count() != 2 {
			t.Fatalf("stats %+v, shipped %d", s, rec.count())
		}
		for _, m := range rec.sent() {
			if b := string(m.Body); b != "now" && b != "unordered" {
				t.Errorf("shipped %q", b)
			}
		}
	})
}

// TestDeleteAndCleanup ships with Delete, which leaves no row, and without,
// whose sent rows Cleanup deletes once past their retention.
func TestDeleteAndCleanup(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e env) {
		testkit.AddCommitted(t, e.db, e.o, orderedMessages(5, 2)...)
		r := newRelay(t, e.o, new(recorder), outbox.RelayConfig{Delete: true})
		waitStats(t, e.o, "all deleted", func(s outbox.Counts) bool { return s == outbox.Counts{} })
		r.Close()
		if st := r.Stats(); st.Shipped != 5 {
			t.Fatalf("relay stats %+v", st)
		}

		testkit.AddCommitted(t, e.db, e.o, orderedMessages(5, 2)...)
		r = newRelay(t, e.o, new(recorder), outbox.RelayConfig{CleanupInterval: -1})
		waitStats(t, e.o, "all sent", func(s outbox.Counts) bool { return s.Sent == 5 })
		r.Close()
		if n, err := e.o.Cleanup(t.Context(), time.Hour); err != nil || n != 0 {
			t.Fatalf("Cleanup with an hour's retention deleted %d (%v)", n, err)
		}
		time.Sleep(2 * time.Millisecond) // past a millisecond's retention on SQLite's clock
		if n, err := e.o.Cleanup(t.Context(), time.Millisecond); err != nil || n != 5 {
			t.Fatalf("Cleanup deleted %d (%v), want 5", n, err)
		}
	})
}

// TestCloseDrains closes a relay while the sends of its claim block: sends
// that return within the drain timeout finish, and their rows are marked,
// before Close returns. Sends that return only once their context ends are
// cut off at the drain timeout, and their rows stay pending for the next
// relay, which ships them.
func TestCloseDrains(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e env) {
		started, unblock := make(chan struct{}, 10), make(chan struct{})
		blocked := senderFunc(func(ctx context.Context, m *outbox.Message) error {
			started <- struct{}{}
			select {
			case <-unblock:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		testkit.AddCommitted(t, e.db, e.o, orderedMessages(4, 4)...)
		r := newRelay(t, e.o, blocked, outbox.RelayConfig{})
		for range 4 {
			<-started
		}
		closed := make(chan struct{})
		go func() { r.Close(); close(closed) }()
		close(unblock)
		<-closed
		if s, err := e.o.Count(t.Context()); err != nil || s.Sent != 4 {
			t.Fatalf("after Close: %+v (%v)", s, err)
		}

		stuck := senderFunc(func(ctx context.Context, m *outbox.Message) error {
			started <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		})
		testkit.AddCommitted(t, e.db, e.o, orderedMessages(2, 2)...)
		r = newRelay(t, e.o, stuck, outbox.RelayConfig{DrainTimeout: 10 * time.Millisecond})
		<-started
		<-started
		r.Close()
		if s, err := e.o.Count(t.Context()); err != nil || s.Pending != 2 {
			t.Fatalf("after a Close that ran out of time: %+v (%v)", s, err)
		}
		r = newRelay(t, e.o, new(recorder), outbox.RelayConfig{})
		waitStats(t, e.o, "the rows shipped by the next relay", func(s outbox.Counts) bool { return s.Sent == 6 })
		r.Close()
	})
}

// TestMarkRetriedAfterDeadlock deadlocks a relay's marking of the rows it
// shipped with a transaction of the test's, and makes the relay the
// victim: the mark runs again and the rows are marked sent, not left
// leased (for an hour here) to ship again when the lease ends.
func TestMarkRetriedAfterDeadlock(t *testing.T) {
	forBackends(t, []testdb.Backend{testdb.MySQL, testdb.Postgres}, func(t *testing.T, e env) {
		ctx, db, o := t.Context(), e.db, e.o
		syn := sqldialect.Of(e.b.Dialect)
		testkit.AddCommitted(t, db, o, outbox.Message{Topic: "orders", Body: []byte("a")}, outbox.Message{Topic: "orders", Body: []byte("b")})
		rows, err := o.List(ctx, outbox.Pending, 0, 2)
		if err != nil || len(rows) != 2 {
			t.Fatalf("List = %v, %v", rows, err)
		}
		// On MySQL a deadlock's victim is the transaction that changed
		// fewer rows, so the test's changes many of a table of its own.
		// PostgreSQL aborts the transaction that looks for the deadlock
		// first, deadlock_timeout after it began to wait: the relay's, which
		// waits first, if it looks after the test's statement joined the
		// cycle (within 100 ms even on a loaded machine), so it waits 2 s
		// (new connections: the relay's pool of its own) and the test's
		// transaction a minute. Its retried mark may take the first row
		// again before the test's statement wakes and form the deadlock
		// anew: each round costs 2 s, and the relay's 10 s bound on a mark
		// leaves room for several.
		if _, err := db.ExecContext(ctx, `CREATE TABLE ballast (n INTEGER)`); err != nil {
			t.Fatal(err)
		}
		if e.b.Dialect == sqldialect.Postgres {
			var name string
			if err := db.QueryRowContext(ctx, `SELECT current_database()`).Scan(&name); err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, `ALTER DATABASE `+syn.Quote(name)+` SET deadlock_timeout = '2s'`); err != nil {
				t.Fatal(err)
			}
			o = e.reopen(t)
		}
		started, unblock := make(chan struct{}, 2), make(chan struct{})
		rec := &recorder{fail: func(*outbox.Message) error {
			started <- struct{}{}
			<-unblock
			return nil
		}}
		newRelay(t, o, rec, outbox.RelayConfig{Lease: time.Hour})
		<-started
		<-started

		tx := begin(t, db)
		exec := func(what, query string, args ...any) {
			if _, err := tx.ExecContext(ctx, syn.Rebind(query), args...); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
		if e.b.Dialect == sqldialect.Postgres {
			exec("deadlock timeout", `SET LOCAL deadlock_timeout = '60s'`)
		}
		exec("ballast", `INSERT INTO ballast (n) VALUES `+strings.TrimSuffix(strings.Repeat("(1), ", 1000), ", "))
		touch := `UPDATE ` + syn.Quote(o.Table()) + ` SET last_error = 'test' WHERE id = ?`
		exec("lock the second row", touch, rows[1].ID)
		close(unblock) // the relay marks both rows: it locks the first, waits for the second
		// The relay's mark waits for a lock: pg_locks shows it (in this
		// test's database), MariaDB's INNODB_TRX does not list
		// autocommitted statements, so its process list shows the mark (in
		// this test's database) and the status counts a wait.
		waiting := `SELECT COUNT(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE NOT l.granted AND a.datname = current_database()`
		if e.b.Dialect == sqldialect.MySQL {
			waiting = `SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE db = DATABASE() AND info LIKE 'UPDATE%'
AND (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'INNODB_ROW_LOCK_CURRENT_WAITS') > 0`
		}
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
			var n int
			if err := db.QueryRowContext(ctx, waiting).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the relay's mark never waited for the second row")
			}
		}
		exec("lock the first row (this transaction was the deadlock's victim, not the relay)", touch, rows[0].ID)
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		waitStats(t, o, "the rows marked sent", func(s outbox.Counts) bool { return s.Sent == 2 })
		if n := rec.count(); n != 2 {
			t.Fatalf("%d sends, want 2", n)
		}
	})
}

// TestOpenBusinessTransactionHoldsNothingBack ships rows while a business
// transaction that added the next row stays open: the relay's claim and
// marks, which name rows by spans of ids, must not wait for the lock of
// that uncommitted row at the table's tail (InnoDB locks the row after a
// range under REPEATABLE READ), and the row ships once it commits.
func TestOpenBusinessTransactionHoldsNothingBack(t *testing.T) {
	forBackends(t, []testdb.Backend{testdb.MySQL, testdb.Postgres}, func(t *testing.T, e env) {
		ctx := t.Context()
		testkit.AddCommitted(t, e.db, e.o, orderedMessages(4, 1)[:2]...)
		tx := begin(t, e.db)
		if _, err := e.o.AddBatch(ctx, tx, orderedMessages(4, 1)[2:]); err != nil {
			t.Fatal(err)
		}
		rec := new(recorder)
		newRelay(t, e.o, rec, outbox.RelayConfig{})
		waitStats(t, e.o, "the committed rows shipped while the transaction is open", func(s outbox.Counts) bool { return s.Sent == 2 })
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		waitStats(t, e.o, "every row shipped", func(s outbox.Counts) bool { return s.Sent == 4 })
		checkOrder(t, rec.sent(), 4, 1)
	})
}

type senderFunc func(ctx context.Context, m *outbox.Message) error

func (f senderFunc) Send(ctx context.Context, m *outbox.Message) error { return f(ctx, m) }

// TestBrokerOutage fails every send for a while, as a broker that is down:
// no row ships or is lost meanwhile, and once sends succeed again every
// row ships, each key in order.
func TestBrokerOutage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e env) {
		const n, keys = 60, 6
		up := make(chan struct{})
		rec := &recorder{fail: func(*outbox.Message) error {
			select {
			case <-up:
				return nil
			default:
				return errBroker
			}
		}}
		testkit.AddCommitted(t, e.db, e.o, orderedMessages(n, keys)...)
		r := newRelay(t, e.o, rec, outbox.RelayConfig{MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
		waitStats(t, e.o, "every key's first row to fail twice", func(outbox.Counts) bool { return r.Stats().Retried >= 2*keys })
		if s, err := e.o.Count(t.Context()); err != nil || s.Pending != n || rec.count() != 0 {
			t.Fatalf("while down: %+v (%v), shipped %d", s, err, rec.count())
		}
		close(up)
		waitStats(t, e.o, "all sent", func(s outbox.Counts) bool { return s.Sent == n })
		r.Close()
		checkOrder(t, rec.sent(), n, keys)
	})
}

// TestRelayConfigValidate checks the bounds Validate sets, from a config
// with every duration set.
func TestRelayConfigValidate(t *testing.T) {
	valid := outbox.RelayConfig{Batch: 100, Concurrency: 16, PollInterval: time.Millisecond, Lease: time.Second,
		MinBackoff: time.Millisecond, MaxBackoff: time.Second, Retention: time.Hour, DrainTimeout: time.Second}
	for _, tc := range []struct {
		name   string
		change func(*outbox.RelayConfig)
		ok     bool
	}{
		{"Valid", func(*outbox.RelayConfig) {}, true},
		{"LargestBatch", func(c *outbox.RelayConfig) { c.Batch = 1024 }, true},
		{"BatchTooLarge", func(c *outbox.RelayConfig) { c.Batch = 1025 }, false},
		{"NoBatch", func(c *outbox.RelayConfig) { c.Batch = 0 }, false},
		{"NegativeConcurrency", func(c *outbox.RelayConfig) { c.Concurrency = -1 }, false},
		{"NoLease", func(c *outbox.RelayConfig) { c.Lease = 0 }, false},
		{"BackoffsCrossed", func(c *outbox.RelayConfig) { c.MinBackoff = 2 * time.Second }, false},
		{"NegativeMaxAttempts", func(c *outbox.RelayConfig) { c.MaxAttempts = -1 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid
			tc.change(&c)
			if err := c.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok %v", err, tc.ok)
			}
		})
	}
}
