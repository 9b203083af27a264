package remoting_test

import (
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testenv/remotingread"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/outbox"
)

// TestBrokerDownDatabaseRestarted runs a relay over a PostgreSQL of the
// test's own into a RocketMQ of its own, kills the broker (SIGKILL) for
// 30 s and the time it takes to start again while rows keep being added,
// restarts the database midway through the outage, and starts the broker
// again: the rows wait, then every one
// ships, each ordering key's in the order added; a row that ships twice
// carries its own key both times.
func TestBrokerDownDatabaseRestarted(t *testing.T) {
	// Its servers are its own: it runs beside the package's other tests.
	t.Parallel()
	if !racechild.Test(t) {
		return
	}
	const (
		keys   = 6
		outage = 30 * time.Second
	)
	begin := time.Now()
	pg := testenv.StartPrivatePostgres(t)
	mq, err := testenv.StartRocketMQ(t.Context(), t.TempDir(), nil)
	if errors.Is(err, exec.ErrNotFound) {
		testenv.Missing(t, err.Error()) // a failure under CI=true
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := mq.Stop(); err != nil {
			t.Error(err)
		}
	})
	started := time.Since(begin)
	ns := mq.NameServer()
	topic := fmt.Sprintf("outbox-outage-%d-%d", os.Getpid(), time.Now().UnixNano())
	got := remotingread.Topic(t, ns, topic, 4)

	db, err := sql.Open("pgx", pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	o := migrated(t, db, dialect.Postgres, 1)
	r, err := outbox.NewRelay(o, newSender(t, ns, topic+"-relay"), outbox.RelayConfig{
		Batch: 20, Lease: 5 * time.Second, MaxBackoff: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })

	// add adds rows one transaction each, the next body of each key in
	// turn. A transaction that fails before its commit (a pooled
	// connection the restart closed) added nothing and is tried again; a
	// failed commit would leave the row's fate unknown, and fails the test.
	var bodies []string
	want := map[string]string{} // key → body
	add := func(rows int, every time.Duration) {
		for range rows {
			i := len(bodies)
			k := fmt.Sprintf("order-%d", i%keys)
			m := outbox.Message{Topic: topic, OrderingKey: k, Body: fmt.Appendf(nil, "%s/%d", k, i/keys)}
			for attempt := 0; ; attempt++ {
				tx, err := db.BeginTx(t.Context(), nil)
				if err == nil {
					var key string
					if key, err = o.Add(t.Context(), tx, m); err == nil {
						if err := tx.Commit(); err != nil {
							t.Fatalf("commit of row %d: %v", i, err)
						}
						want[key] = string(m.Body)
						break
					}
					tx.Rollback()
				}
				if attempt == 10 {
					t.Fatalf("row %d: %v", i, err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			bodies = append(bodies, string(m.Body))
			time.Sleep(every)
		}
	}
	count := func() int {
		return len(got.Snapshot())
	}

	add(60, 10*time.Millisecond)
	got.Await(t, "the rows before the outage", func(ms []*primitive.MessageExt) bool { return len(ms) >= 60 })
	if err := mq.KillBroker(0); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	before := count()
	// The broker stays down for the whole outage: its restart begins only
	// then, and it serves again once its JVM has started and registered.
	restartAt := killed.Add(outage)
	add(60, 5*time.Second/60)
	if err := pg.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	add(60, 5*time.Second/60)
	time.Sleep(time.Until(restartAt))
	st, err := o.Count(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.Pending < 120 || count() != before {
		t.Fatalf("while the broker was down: %+v, received %d then %d", st, before, count())
	}
	retried := r.Stats().Retried
	back := make(chan error, 1)
	go func() { back <- mq.RestartBroker(t.Context(), 0) }()
	add(30, 100*time.Millisecond) // while the broker starts
	if err := <-back; err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	add(30, 10*time.Millisecond)
	n := len(bodies)

	var recv []*primitive.MessageExt
	for deadline := time.Now().Add(2 * time.Minute); ; {
		recv = got.Snapshot()
		seen := map[string]bool{}
		for _, m := range recv {
			seen[msgkey.Of(m)] = true
		}
		if len(seen) == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d rows received, %d copies, 2 min after the broker's restart", len(seen), n, len(recv))
		}
		time.Sleep(50 * time.Millisecond)
	}
	drained := time.Since(restarted)
	checkShipped(t, recv, want)
	waitPending(t, o)
	if st, err := o.Count(t.Context()); err != nil || st.Sent != int64(n) || st.Parked != 0 {
		t.Fatalf("stats %+v (%v), want %d sent", st, err, n)
	}
	t.Logf("%sRocketMQ %s and PostgreSQL started in %v; broker down %v (killed to registered again) with %d rows pending when its restart began (%d sends failed); all %d rows received %v after it, %d copies (%d duplicates); %v in all",
		racechild.Figure, mq.Version(), started.Round(time.Millisecond), restarted.Sub(killed).Round(100*time.Millisecond), st.Pending, retried,
		n, drained.Round(100*time.Millisecond), len(recv), len(recv)-n, time.Since(begin).Round(100*time.Millisecond))
}
