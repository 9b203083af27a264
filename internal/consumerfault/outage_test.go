package consumerfault

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/remoting"
)

// TestStoreOutageSpendsNoRetries kills (SIGKILL) the dedupe store, a Redis
// of the test's own, once about a third of 300 messages are applied, keeps
// it down for 12 s (over twice the 5 s lease, and thrice the seconds the
// retries below cover) while the rest are sent and delivered, and starts it
// again on the same port. The group allows 3 reconsumes
// (rmq.WithMaxReconsumeTimes(3), told to the Consumer) and the broker's
// delay levels are 1 s each (internal/testenv): a message handed back for
// every delivery that finds the store down reaches %DLQ%<group> within
// seconds. The Redis client has go-redis's default options, with which a
// call to a Redis that is down takes seconds to fail (it dials and retries).
// The Redis keeps its keys on disk (appendfsync always), as one that
// crashes and restarts does: what the test kills is the store's
// availability, not its data.
//
// It counts exactly: keys lost (never applied), dead-lettered, applied
// twice. All must be 0; no message may be handed back for the outage
// (Stats.StoreDown 0: each waited in process and ran in the same
// delivery); each outage must be logged once when it begins and once when
// it ends; and messages must have waited for the store, or the run proved
// nothing.
//
// How it fails: the consumer before 5af6cd4 handed every delivery that
// found the store down back at once (ConsumeRetryLater). Run against it
// (4fe793d), this test counted 200 of 300 messages dead-lettered and never
// applied, each of them delivered 4 times and answered store-down every
// time (800 deliveries handed back), and 65 claims sent to the dead Redis,
// the slowest failing after 4.2 s; the new consumer sent it 2 claims and
// 10 probes.
func TestStoreOutageSpendsNoRetries(t *testing.T) {
	if !inChild(t, rocketmq4(t)...) {
		return
	}
	const (
		total      = 300
		sendFor    = 20 * time.Second
		outage     = 12 * time.Second
		reconsumes = 3
		lease      = 5 * time.Second
		work       = 10 * time.Millisecond
	)
	begin := time.Now()
	f := newFixture(t, "outage")
	topic, group := f.topic(4), f.group()
	dlq := f.watchDLQ(group)
	p := f.producer()

	srv := testenv.StartPrivateRedis(t, "--appendonly", "yes", "--appendfsync", "always")
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { rdb.Close() })
	rs, err := newStore(rdb, f.storePrefix())
	if err != nil {
		t.Fatal(err)
	}
	store := &watched{Store: rs}
	logs := &testkit.Logs{}
	c, err := consumer.New(store, group,
		consumer.WithGuard(guardConfig(lease)),
		consumer.WithLogger(slog.New(logs)),
		consumer.WithMaxReconsumeTimes(reconsumes),
		consumer.WithDelayLevels(brokerLevels...))
	if err != nil {
		t.Fatal(err)
	}
	var applied atomic.Int64
	cb := remoting.Concurrently(c, func(ctx context.Context, m *consumer.Message) error {
		time.Sleep(work)
		if err := apply(ctx, f.rdb, f.ledger(), msgkey.Of(m)); err != nil {
			return err
		}
		applied.Add(1)
		return nil
	})
	pc, err := start(settings{Namesrv: f.ns, Topic: topic, Group: group, Instance: "cf-outage-" + f.run}, cb, rmq.WithMaxReconsumeTimes(reconsumes))
	if err != nil {
		t.Fatal(err)
	}
	drain := drainer(t, c, pc)

	sending := sendPaced(t.Context(), p, topic, total, sendFor)
	for applied.Load() < total/3 {
		if time.Since(begin) > 2*time.Minute {
			t.Fatalf("%d of %d messages applied after %v; the outage was never staged", applied.Load(), total, time.Since(begin))
		}
		time.Sleep(10 * time.Millisecond)
	}
	st := c.Stats
	atKill := applied.Load()
	store.down.Store(true)
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	time.Sleep(outage)
	waitedWhileDown := st().StoreWaited
	appliedWhileDown := applied.Load() - atKill
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	store.down.Store(false)
	restarted := time.Now()
	sent, err := sending()
	if err != nil {
		t.Fatal(err)
	}

	tl := f.settle(sent, dlq, func() bool { return testkit.Decided(st()) }, 2*time.Minute, 2*time.Second)
	recovered := time.Since(restarted) // at most: includes the settle's quiet
	if err := drain(); err != nil {
		t.Errorf("drain of an idle consumer: %v", err)
	}
	var starts, ends int64 // outages the consumer logged beginning and ending
	for _, m := range logs.Messages() {
		switch {
		case strings.HasPrefix(m, "idemq: dedupe store down"):
			starts++
		case strings.HasPrefix(m, "idemq: dedupe store answers again"):
			ends++
		}
	}
	t.Logf(racechild.Figure+"%v; Redis killed for %v after %d applied (%d applied meanwhile, by handlers past their claims; %d messages waiting in process at its restart); all settled within %v of the restart (2 s of quiet included), %v in all",
		tl, restarted.Sub(killed).Round(100*time.Millisecond), atKill, appliedWhileDown, waitedWhileDown,
		recovered.Round(100*time.Millisecond), time.Since(begin).Round(100*time.Millisecond))
	t.Logf(racechild.Figure+"consumer: delivered=%d completed=%d suppressed=%d waited-for-store=%d store-down=%d unrecorded=%d lease-lost=%d retried=%d outages=%d (logged %d starts, %d ends)",
		st().Delivered, st().Completed, st().Suppressed, st().StoreWaited, st().StoreDown,
		st().Unrecorded, st().LeaseLost, st().Retried, st().Outages, starts, ends)
	t.Logf(racechild.Figure+"%s", store.report())
	tl.Check(t)
	switch {
	case st().StoreDown != 0:
		t.Errorf("%d deliveries handed back for the outage, want 0: each should have waited for the store", st().StoreDown)
	case st().Outages == 0 || starts != st().Outages || ends != st().Outages:
		t.Errorf("%d outages, logged %d starts and %d ends; want each outage logged once at its start and once at its end", st().Outages, starts, ends)
	case waitedWhileDown == 0:
		t.Errorf("no message waited for the store while it was down: this run proved nothing")
	}
}

// watched is the run's Redis dedupe store, with a count of the calls made
// while the Redis was down: claims (each message's, or a group commit's
// batch), and extensions (the Consumer's probe; handlers take milliseconds
// and renew no lease), with the longest a failing call took.
type watched struct {
	*redisdedupe.Store
	down atomic.Bool

	mu                     sync.Mutex
	claims, extends, fails int
	slowest                time.Duration
}

func (w *watched) note(extend bool, start time.Time, err error) {
	if !w.down.Load() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if extend {
		w.extends++
	} else {
		w.claims++
	}
	if err != nil {
		w.fails++
		w.slowest = max(w.slowest, time.Since(start))
	}
}

func (w *watched) report() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprintf("store calls while Redis was down: %d claims, %d probes, %d failed, the slowest failure %v",
		w.claims, w.extends, w.fails, w.slowest.Round(time.Millisecond))
}

func (w *watched) Claim(ctx context.Context, reqs []dedupe.Item, lease time.Duration) ([]dedupe.ClaimResult, []error, error) {
	start := time.Now()
	r, errs, err := w.Store.Claim(ctx, reqs, lease)
	w.note(false, start, err)
	return r, errs, err
}

func (w *watched) Extend(ctx context.Context, t dedupe.Ticket, lease time.Duration) error {
	start := time.Now()
	err := w.Store.Extend(ctx, t, lease)
	w.note(true, start, err)
	return err
}

var _ dedupe.Store = (*watched)(nil)
