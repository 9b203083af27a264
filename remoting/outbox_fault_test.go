package remoting_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/relaychild"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testenv/remotingread"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/outbox"
)

// TestRelayProcessesKilledAndPaused ships 600 rows of 12 ordering keys
// from one PostgreSQL table through three relay processes into a real
// broker. One is killed with SIGKILL mid-batch and replaced; another is
// SIGSTOPped past its lease and resumed. Nothing is lost; every copy the
// broker holds carries its row's key; each key's messages first arrive in
// the order they were added; and an idemq consumer (package consumer over
// a Redis dedupe store) in front of the topic applies each key once, every
// duplicate suppressed.
func TestRelayProcessesKilledAndPaused(t *testing.T) {
	if !racechild.Test(t, "IDEMQ_ROCKETMQ_NAMESRV="+testenv.RocketMQ(t), "IDEMQ_POSTGRES_DSN="+testenv.Postgres(t),
		"IDEMQ_REDIS_ADDR="+testenv.Redis(t)) {
		return
	}
	const (
		n, keys = 600, 12
		lease   = 2 * time.Second
	)
	ns := testenv.RocketMQ(t)
	run := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	topic := "outbox-fault-" + run
	got := remotingread.Topic(t, ns, topic, 4)
	effects := applyOnce(t, ns, topic, run)

	b := testdb.Postgres
	dsn := b.DSN(t)
	db := b.OpenDSN(t, dsn)
	o := migrated(t, db, b.Dialect, 1)
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		k := fmt.Sprintf("order-%d", i%keys)
		msgs[i] = outbox.Message{Topic: topic, OrderingKey: k, Body: fmt.Appendf(nil, "%s/%d", k, i/keys)}
	}
	added := testkit.AddCommitted(t, db, o, msgs...)

	start := func(i int) *racechild.Proc {
		s := relaychild.Settings{Namesrv: ns, Backend: b.Name, DSN: dsn, Name: fmt.Sprintf("%s-relay%d", topic, i),
			Lease: lease, Pause: 20 * time.Millisecond, Midway: 30}
		p := racechild.Start(t, relaychild.Role, fmt.Sprintf("relay %d", i), s)
		p.Expect(t, "started", time.Minute)
		return p
	}
	// Each faulted relay reaches its midway while it is the only one
	// running: with others beside it, a relay can lose every claim before
	// its 30th send (a relay that records a claim claims again at once,
	// others when their poll interval ends), and once said it never would.
	paused := start(1)
	paused.Expect(t, "midway", time.Minute)
	paused.Pause(t)
	pausedAt := time.Now()
	killed := start(0)
	killed.Expect(t, "midway", time.Minute)
	killed.Kill(t)
	steady := start(2)
	time.Sleep(time.Until(pausedAt.Add(lease + time.Second))) // past the paused relay's lease
	paused.Resume(t)
	replacement := start(3)

	recv := got.Await(t, "every row", func(ms []*primitive.MessageExt) bool {
		seen := map[string]bool{}
		for _, m := range ms {
			seen[msgkey.Of(m)] = true
		}
		return len(seen) == n
	})
	var shipped, lost int64
	for _, p := range []*racechild.Proc{paused, steady, replacement} {
		p.Stop()
		var s, l int64
		fmt.Sscanf(p.Expect(t, "stats ", time.Minute), "%d %d", &s, &l)
		shipped, lost = shipped+s, lost+l
		p.Wait(t, time.Minute, racechild.Libraries)
	}

	want := map[string]string{}
	for i, k := range added {
		want[k] = string(msgs[i].Body)
	}
	checkShipped(t, recv, want)
	st, err := o.Count(t.Context())
	if err != nil || st.Pending != 0 || st.Sent != n {
		t.Fatalf("stats %+v (%v)", st, err)
	}

	// The relays are stopped: the broker holds its last copy. The idemq
	// consumer handles each, and applies each key once.
	copies := len(got.Snapshot())
	cs := effects.c.Stats
	for deadline := time.Now().Add(30 * time.Second); cs().Completed+cs().Suppressed < int64(copies); {
		if time.Now().After(deadline) {
			t.Fatalf("the idemq consumer handled %d of %d copies (%d applied, %d suppressed)",
				cs().Completed+cs().Suppressed, copies, cs().Completed, cs().Suppressed)
		}
		time.Sleep(50 * time.Millisecond)
	}
	applied := effects.counts()
	var missing, doubled int
	for _, k := range added {
		switch applied[k] {
		case 0:
			missing++
		case 1:
		default:
			doubled++
		}
	}
	if missing != 0 || doubled != 0 || len(applied) != n {
		t.Errorf("the idemq consumer applied %d keys: %d of the %d rows' keys never, %d more than once", len(applied), missing, n, doubled)
	}
	t.Logf("%s%d rows, %d copies received (%d duplicates); the surviving relays marked %d, %d after their lease ended",
		racechild.Figure, n, copies, copies-n, shipped, lost)
	t.Logf("%sidemq consumer: delivered %d, applied %d keys once each (%d lost, %d doubled), suppressed %d",
		racechild.Figure, cs().Delivered, len(applied), missing, doubled, cs().Suppressed)
}

// effects is what an idemq consumer of a test topic applied: how many
// times its handler ran for each key.
type effects struct {
	c       *consumer.Consumer
	mu      sync.Mutex
	applied map[string]int
}

func (e *effects) counts() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.applied)
}

// applyOnce consumes topic, from its first offset until t ends, through
// an idemq consumer over a Redis dedupe store on the shared Redis (its
// records under a prefix of run's), counting each key's effects.
func applyOnce(t *testing.T, ns, topic, run string) *effects {
	t.Helper()
	group := topic + "-idemq"
	rdb := redis.NewClient(&redis.Options{Addr: testenv.Redis(t)})
	t.Cleanup(func() { rdb.Close() })
	store, err := redisdedupe.New(rdb, redisdedupe.Config{Prefix: "outbox-fault:" + run + ":"})
	if err != nil {
		t.Fatal(err)
	}
	// The records need to outlive the test only: the Redis is shared.
	c, err := consumer.New(store, group, consumer.WithGuard(dedupe.GuardConfig{Lease: 10 * time.Second, Retention: 10 * time.Minute}),
		consumer.AcceptShortRetention())
	if err != nil {
		t.Fatal(err)
	}
	e := &effects{c: c, applied: map[string]int{}}
	consumeFromFirst(t, ns, topic, group, c, func(_ context.Context, m *consumer.Message) error {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.applied[msgkey.Of(m)]++
		return nil
	})
	return e
}
