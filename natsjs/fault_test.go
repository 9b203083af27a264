package natsjs_test

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
)

// faultRun is one fault test's stream, durable consumer, sent keys and
// ledger, and the worker processes that consume them.
type faultRun struct {
	t       *testing.T
	f       *fixture
	rdb     *redis.Client
	db      *sql.DB // the effects' database, in SQL mode
	base    workerSettings
	sent    []string
	started time.Time
}

// faultAckWait is the fault tests' AckWait: a killed worker's messages
// come back after it; a wait outlasts it several times over.
const faultAckWait = 2 * time.Second

// newFaultRun makes a stream and a durable consumer on the server at url,
// with MaxDeliver maxReconsume+1, and publishes n keyed messages.
func newFaultRun(t *testing.T, url string, n int, maxReconsume int32, base workerSettings) *faultRun {
	t.Helper()
	r := &faultRun{t: t, started: time.Now()}
	r.f = newFixture(t, url, jetstream.ConsumerConfig{AckWait: faultAckWait, MaxDeliver: int(maxReconsume) + 1, MaxAckPending: 1000})
	effects := testenv.Redis(t)
	r.rdb = redis.NewClient(&redis.Options{Addr: effects})
	t.Cleanup(func() { r.rdb.Close() })
	base.NATS, base.Stream, base.Durable = url, r.f.stream, r.f.durable
	base.Effects, base.Ledger = effects, "natsjs-ledger:"+r.f.stream
	if base.Store == "" {
		base.Store = effects
	}
	base.MaxReconsume = maxReconsume
	if base.Delay == 0 {
		base.Delay = 200 * time.Millisecond
	}
	r.base = base
	for i := range n {
		r.sent = append(r.sent, r.f.stream+"-"+strconv.Itoa(i))
	}
	r.f.send(t, r.sent...)
	return r
}

// start starts a worker process named name.
func (r *faultRun) start(name string) *racechild.Proc {
	r.t.Helper()
	p := racechild.Start(r.t, roleWorker, name, r.base)
	p.Expect(r.t, "ready", time.Minute)
	return p
}

// applied returns how often each key was applied.
func (r *faultRun) applied() map[string]int {
	r.t.Helper()
	if r.db != nil {
		return testkit.CountBy(r.t, r.db, "SELECT k, COUNT(*) FROM effects GROUP BY k")
	}
	m, err := r.rdb.HGetAll(context.Background(), r.base.Ledger).Result()
	if err != nil {
		r.t.Fatal(err)
	}
	n := make(map[string]int, len(m))
	for k, v := range m {
		n[k], _ = strconv.Atoi(v)
	}
	return n
}

// waitApplied waits until at least n keys were applied.
func (r *faultRun) waitApplied(n int) {
	r.t.Helper()
	testkit.WaitFor(r.t, fmt.Sprintf("%d keys applied", n), func() bool { return len(r.applied()) >= n })
}

// stop stops p, which drains, and returns its stats line.
func (r *faultRun) stop(p *racechild.Proc) string {
	r.t.Helper()
	p.Stop()
	stats := p.Expect(r.t, "stats ", time.Minute)
	p.Wait(r.t, time.Minute, nil)
	return stats
}

// settle waits for every key to be applied, then a quiet AckWait and a
// half more so that a late redelivery shows, and reports the lost and
// doubled keys; it fails t if any is lost, or more are doubled than
// maxDoubled.
func (r *faultRun) settle(maxDoubled int) (lost, doubled int) {
	r.t.Helper()
	r.waitApplied(len(r.sent))
	time.Sleep(faultAckWait * 3 / 2)
	n := r.applied()
	for _, k := range r.sent {
		switch {
		case n[k] == 0:
			lost++
		case n[k] > 1:
			doubled++
		}
	}
	r.t.Logf("figure: %d sent, %d lost, %d doubled, in %v", len(r.sent), lost, doubled, time.Since(r.started).Round(time.Millisecond))
	if lost > 0 || doubled > maxDoubled {
		r.t.Errorf("%d lost, %d doubled of %d; want 0 lost, at most %d doubled", lost, doubled, len(r.sent), maxDoubled)
	}
	return lost, doubled
}

// TestFaults runs consumer processes on a durable consumer through
// faults, each counting the keys lost (never applied) and doubled
// (applied twice) among those sent:
//
//   - FailingHandlers: a key in seven fails its first run; each is
//     retried and applied once.
//   - KillMidBatch: two workers pull batches of 16; one is killed with
//     SIGKILL while its handlers run. Its messages come back after the
//     AckWait, to the other: none is lost; those whose effect it applied
//     without recording the key (at most its messages in hand) run again.
//   - Rebalance: a second worker joins the first mid-stream, then the
//     first drains and leaves: none lost, none doubled.
//   - ServerRestart: the nats-server is killed with SIGKILL mid-stream and
//     started again on its store: what it had not recorded as
//     acknowledged is redelivered and suppressed; none lost, none doubled.
//   - StoreDown: the dedupe store (Redis) is killed for 3 s, longer than
//     the AckWait (2 s) and than the whole retry policy (MaxDeliver 3 at
//     200 ms): the messages in hand wait with InProgress, spending no
//     delivery; none lost, none doubled.
func TestFaults(t *testing.T) {
	t.Parallel()
	url := testenv.NATS(t)
	t.Run("FailingHandlers", func(t *testing.T) {
		t.Parallel()
		r := newFaultRun(t, url, 300, 4, workerSettings{FailEvery: 7, Workers: 8, BatchSize: 4})
		p := r.start("worker")
		r.settle(0)
		t.Logf("figure: worker %s", r.stop(p))
	})
	t.Run("KillMidBatch", func(t *testing.T) {
		t.Parallel()
		r := newFaultRun(t, url, 400, 4, workerSettings{Workers: 2, BatchSize: 16, Hold: 10 * time.Millisecond})
		a, b := r.start("worker a"), r.start("worker b")
		r.waitApplied(100)
		a.Kill(t)
		// Its messages in hand, at most Workers × BatchSize, may have run
		// without their keys recorded.
		r.settle(2 * 16)
		t.Logf("figure: survivor %s", r.stop(b))
	})
	t.Run("Rebalance", func(t *testing.T) {
		t.Parallel()
		r := newFaultRun(t, url, 400, 4, workerSettings{Workers: 4, BatchSize: 4, Hold: 10 * time.Millisecond})
		a := r.start("worker a")
		r.waitApplied(50)
		b := r.start("worker b")
		r.waitApplied(200)
		statsA := r.stop(a) // drains while b runs
		r.settle(0)
		t.Logf("figure: drained %s; stayed %s", statsA, r.stop(b))
	})
	t.Run("ServerRestart", func(t *testing.T) {
		t.Parallel()
		srv := testenv.StartPrivateNATS(t)
		r := newFaultRun(t, srv.URL(), 400, 4, workerSettings{Workers: 4, BatchSize: 4, Hold: 5 * time.Millisecond})
		p := r.start("worker")
		r.waitApplied(100)
		if err := srv.Kill(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond) // down a while: the worker's pulls fail
		if err := srv.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		r.settle(0)
		t.Logf("figure: worker %s", r.stop(p))
	})
	t.Run("StoreDown", func(t *testing.T) {
		t.Parallel()
		store := testenv.StartPrivateRedis(t, "--appendonly", "yes", "--appendfsync", "always")
		r := newFaultRun(t, url, 200, 2, workerSettings{Store: store.Addr(), Workers: 4, BatchSize: 1, Hold: 10 * time.Millisecond, Delay: 100 * time.Millisecond})
		p := r.start("worker")
		r.waitApplied(50)
		if err := store.Kill(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second) // the outage, longer than the AckWait and the retry policy
		if err := store.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		r.settle(0)
		info, err := r.f.consumer(t).Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("figure: worker %s; consumer: %d redelivered, %d ack pending", r.stop(p), info.NumRedelivered, info.NumAckPending)
	})
}
