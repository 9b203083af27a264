package consumerfault

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/remoting"
)

// oldPathEnv, set to 1, adds the subtest NotToldMaxReconsume, which is
// expected to fail: see TestBusyKeyNeverSpendsLastRetry.
const oldPathEnv = "IDEMQ_CONSUMERFAULT_OLD_PATH"

// TestBusyKeyNeverSpendsLastRetry kills (SIGKILL) a consumer process that
// holds keys — claimed, leases renewed, effects not applied — and has a
// consumer of the same group in this process take the messages over while
// the dead holder's leases still run. The push consumers allow one
// reconsume (rmq.WithMaxReconsumeTimes(1)), and a third of the messages
// were held on their redelivery, that is on their last reconsume: a busy
// key answered with ConsumeRetryLater there sends its message to
// %DLQ%<group>, never to be applied. The taker is told the limit
// (consumer.WithMaxReconsumeTimes(1)) and prefers handing a busy key back
// (consumer.WithBusyWait(1ms)).
//
//   - Told: the taker knows the broker's delay levels (1 s each): a key whose
//     lease outlasts every level is waited for in process anyway.
//   - DelayLevelsNotTold: the taker believes the broker's default levels
//     (1 s, 5 s, …) while the broker waits 1 s: it hands busy keys back,
//     and they come back still busy. Only the last-reconsume rule keeps
//     them out of the dead-letter queue.
//
// Each counts exactly: keys lost (never applied), dead-lettered, applied
// twice. All must be 0; and the taker must have waited for a busy key on
// its message's last reconsume, or the test proved nothing.
//
// How it fails: the consumer before the redesign (5ce4402) answered a busy
// key with ConsumeRetryLater at once, whatever the reconsume count, so
// every message held on its last reconsume was dead-lettered. No option of
// the new consumer brings that back while it is told the client's limit;
// a consumer not told it (its default, 16, against the client's 1) does it
// again. IDEMQ_CONSUMERFAULT_OLD_PATH=1 adds that case, NotToldMaxReconsume
// (busy wait 1 ms, default delay levels and limit), which fails: the
// messages held on their last reconsume, and those handed back that come
// back still busy, are dead-lettered and never applied.
func TestBusyKeyNeverSpendsLastRetry(t *testing.T) {
	if !inChild(t, rocketmq4(t)...) {
		return
	}
	type taker struct {
		name string
		opts []consumer.Option
	}
	tests := []taker{
		{"Told", []consumer.Option{consumer.WithMaxReconsumeTimes(1), consumer.WithBusyWait(time.Millisecond),
			consumer.WithDelayLevels(brokerLevels...)}},
		{"DelayLevelsNotTold", []consumer.Option{consumer.WithMaxReconsumeTimes(1), consumer.WithBusyWait(time.Millisecond)}},
	}
	if os.Getenv(oldPathEnv) == "1" {
		// Told neither the limit nor the levels, the taker counts a
		// redelivery horizon of 4h45m40s, past the test's retention.
		tests = append(tests, taker{"NotToldMaxReconsume", []consumer.Option{consumer.WithBusyWait(time.Millisecond), consumer.AcceptShortRetention()}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { busyKeys(t, tt.opts) })
	}
}

// busyKeys runs TestBusyKeyNeverSpendsLastRetry's scenario with a taker
// configured by opts.
func busyKeys(t *testing.T, opts []consumer.Option) {
	const (
		n = 12
		// lastRetry of the n messages fail their first attempt: the holder
		// holds them on their redelivery, their last reconsume.
		lastRetry = 4
		// The taker must be given its first message within two thirds of
		// a lease of the kill for the run to prove anything; its rebalance
		// took 2.1 s once at load 18, past a 3 s lease's two seconds.
		lease = 6 * time.Second
	)
	begin := time.Now()
	f := newFixture(t, "busy")
	topic, group := f.topic(2), f.group()
	dlq := f.watchDLQ(group)
	p := f.producer()
	sent := sendAll(t, p, topic, n, func(i int) []byte {
		if i < lastRetry {
			return slices.Concat(failFirst, fmt.Appendf(nil, "order %d", i))
		}
		return fmt.Appendf(nil, "order %d", i)
	})

	holder := racechild.Start(t, roleHolder, "holder", settings{
		Namesrv: f.ns, Redis: f.redisAddr, Topic: topic, Group: group, Instance: "cf-holder-" + f.run,
		Prefix: f.storePrefix(), Ledger: f.ledger(), Lease: lease,
	})
	held := awaitHeld(t, holder, n, 30*time.Second) // key: reconsume count it is held on
	onLast := 0
	for _, r := range held {
		if r == 1 {
			onLast++
		}
	}
	if onLast != lastRetry {
		t.Fatalf("holder holds %d keys on their last reconsume, want %d", onLast, lastRetry)
	}
	holder.Kill(t)
	killed := holder.Signalled

	// The taker: the same group, in this process.
	store, err := newStore(f.rdb, f.storePrefix())
	if err != nil {
		t.Fatal(err)
	}
	c, err := consumer.New(store, group, append([]consumer.Option{
		consumer.WithGuard(guardConfig(lease)),
		consumer.WithLogger(slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	cb := remoting.Concurrently(c, func(ctx context.Context, m *consumer.Message) error {
		return apply(ctx, f.rdb, f.ledger(), msgkey.Of(m))
	})
	var (
		mu sync.Mutex
		// deliveries on their last reconsume whose callback waited for a
		// busy key (the effect itself takes a millisecond).
		lastWaited int
		first      time.Duration // from the kill to the first delivery
	)
	pc, err := start(settings{Namesrv: f.ns, Topic: topic, Group: group, Instance: "cf-taker-" + f.run}, func(ctx context.Context, msgs ...*primitive.MessageExt) (rmq.ConsumeResult, error) {
		called := time.Now()
		mu.Lock()
		if first == 0 {
			first = called.Sub(killed)
		}
		mu.Unlock()
		res, err := cb(ctx, msgs...)
		if time.Since(called) > 200*time.Millisecond {
			mu.Lock()
			for _, m := range msgs {
				if m.ReconsumeTimes >= 1 {
					lastWaited++
				}
			}
			mu.Unlock()
		}
		return res, err
	}, rmq.WithMaxReconsumeTimes(1))
	if err != nil {
		t.Fatal(err)
	}
	drain := drainer(t, c, pc)

	// Every key applied (or dead-lettered), and the taker idle. Both copies
	// of a message that failed once come back (the original, whose offset
	// the holder never committed, and its retry): the one that finds the key
	// held by the other waits out that lease before it finds the key done.
	st := c.Stats
	tl := f.settle(sent, dlq, func() bool { return testkit.Decided(st()) }, 30*time.Second, time.Second)
	if err := drain(); err != nil {
		t.Errorf("drain of an idle consumer: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf(racechild.Figure+"%v; taker: first delivery %v after the kill, delivered=%d completed=%d suppressed=%d waited=%d handed-back=%d, %d deliveries on their last reconsume waited; %v in all",
		tl, first.Round(time.Millisecond), st().Delivered, st().Completed, st().Suppressed, st().Waited, st().Busy,
		lastWaited, time.Since(begin).Round(100*time.Millisecond))
	tl.Check(t)
	// The holder renewed its leases every lease/3: each had at least
	// two thirds left at the kill.
	switch {
	case first == 0 || first > lease*2/3:
		t.Errorf("the taker's first delivery came %v after the kill, when the dead holder's leases may have run out: this run proved nothing", first)
	case t.Failed():
	case lastWaited == 0:
		t.Errorf("no message on its last reconsume waited for its busy key: this run proved nothing")
	}
}
