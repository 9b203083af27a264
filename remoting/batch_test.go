package remoting_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/remoting"
)

// batchOf returns messages with keys k0 … k(n-1).
func batchOf(n int) []*primitive.MessageExt {
	msgs := make([]*primitive.MessageExt, n)
	for i := range msgs {
		msgs[i] = msg(fmt.Sprint("k", i))
	}
	return msgs
}

// TestBatchRoundTrips consumes a batch of 32 fresh messages, then its
// redelivery: one claim and one completion in all, then one claim.
func TestBatchRoundTrips(t *testing.T) {
	fs := testkit.NewFaultStore(memdedupe.New(memdedupe.Config{}))
	c, cb, stats, _ := setup(t, fs)
	msgs := batchOf(32)
	for _, want := range []struct {
		claims, completes int
		stat              *atomic.Int64
	}{{1, 1, &stats.Completed}, {2, 1, &stats.Suppressed}} {
		if res, err := cb(context.Background(), msgs...); res != rmq.ConsumeSuccess || err != nil {
			t.Fatalf("got %v, %v; want success", res, err)
		}
		if got := want.stat.Load(); got != 32 {
			t.Errorf("counted %d, want 32", got)
		}
		if n := fs.Calls(testkit.OpClaim); n != want.claims {
			t.Errorf("Claim called %d times, want %d", n, want.claims)
		}
		if n := fs.Calls(testkit.OpComplete); n != want.completes {
			t.Errorf("Complete called %d times, want %d", n, want.completes)
		}
		if n := fs.Calls(testkit.OpAll &^ (testkit.OpClaim | testkit.OpComplete)); n != 0 {
			t.Errorf("%d other store calls, want none", n)
		}
	}
	if len(c.applied) != 32 {
		t.Errorf("applied %d keys, want 32", len(c.applied))
	}
	for k, n := range c.applied {
		if n != 1 {
			t.Errorf("%s applied %d times, want 1", k, n)
		}
	}
}

// TestBatchMixed consumes a batch that holds every kind of message: only
// those that must be retried are, and the redelivery applies each once.
func TestBatchMixed(t *testing.T) {
	store := memdedupe.New(memdedupe.Config{})
	fs := testkit.NewFaultStore(store)
	c, cb, stats, logs := setup(t, fs, noWait)
	if res, _ := cb(context.Background(), msg("done")); res != rmq.ConsumeSuccess {
		t.Fatal("could not complete a key")
	}
	busy := hold(t, store, "busy", time.Hour)
	c.applied = map[string]int{}
	c.fail["fail"] = errors.New("db down")
	c.panics["panic"] = true
	batch := []*primitive.MessageExt{
		msg("fresh"), msg("done"), msg("busy"), msg("fail"), msg(strings.Repeat("x", 300)),
		msg(""), msg("panic"), msg("fresh"), msg("late"),
	}
	cc := &primitive.ConsumeConcurrentlyContext{}
	ctx := primitive.WithConcurrentlyCtx(context.Background(), cc)
	res, err := cb(ctx, batch...)
	if res != rmq.ConsumeRetryLater {
		t.Fatalf("got %v, %v; want retry later", res, err)
	}
	for _, want := range []error{msgkey.ErrInvalid, consumer.ErrNoKey, c.fail["fail"]} {
		if !errors.Is(err, want) {
			t.Errorf("error %v, want %v", err, want)
		}
	}
	if err == nil || !strings.Contains(err.Error(), "held by another consumer") {
		t.Errorf("error %v does not report the busy key", err)
	}
	var p *consumer.PanicError
	if !errors.As(err, &p) {
		t.Errorf("error %v holds no PanicError", err)
	}
	// A batch with a busy key comes back no sooner than its lease ends
	// (level 17 is 1h), failed messages with it.
	if cc.DelayLevelWhenNextConsume != 17 {
		t.Errorf("delay level %d, want 17", cc.DelayLevelWhenNextConsume)
	}
	for k, want := range map[string]int{"fresh": 1, "late": 1, "done": 0, "busy": 0, "fail": 0, "panic": 0} {
		if c.applied[k] != want {
			t.Errorf("%s applied %d times, want %d", k, c.applied[k], want)
		}
	}
	for name, got := range map[string]*atomic.Int64{
		"Delivered": &stats.Delivered, "Completed": &stats.Completed, "Suppressed": &stats.Suppressed,
		"Failed": &stats.Failed, "Busy": &stats.Busy, "Waited": &stats.Waited, "InvalidKey": &stats.InvalidKey,
		"NoKey": &stats.NoKey, "StoreDown": &stats.StoreDown,
	} {
		want := map[string]int64{
			"Delivered": 1 + 9, "Completed": 1 + 2, "Suppressed": 2, // done, and fresh repeated
			"Failed": 2, "Busy": 1, "Waited": 1, "StoreDown": 0,
			"InvalidKey": 2, "NoKey": 1, // no key, and an invalid one
		}[name]
		if got.Load() != want {
			t.Errorf("%s = %d, want %d", name, got.Load(), want)
		}
	}
	if !strings.Contains(logs.String(), "message key cannot be deduplicated") {
		t.Errorf("logs %q do not report the message without a key", logs)
	}
	// One round trip per phase, after the two of the message completed
	// first; the busy key is asked about again, alone, after its wait.
	if n := fs.Calls(testkit.OpClaim | testkit.OpComplete | testkit.OpRelease); n != 2+3+1 {
		t.Errorf("%d store calls, want 6", n)
	}
	if n := fs.Calls(testkit.OpClaim); n != 3 {
		t.Errorf("%d claims, want 3 (the first message's, the batch's and the busy key's after its wait)", n)
	}

	// The broker redelivers the whole batch once the failures are gone.
	if err := testkit.Release(context.Background(), store, busy); err != nil {
		t.Fatal(err)
	}
	c.fail, c.panics = map[string]error{}, map[string]bool{}
	res, err = cb(context.Background(), batch...)
	if res != rmq.ConsumeRetryLater || !errors.Is(err, msgkey.ErrInvalid) || !errors.Is(err, consumer.ErrNoKey) ||
		strings.Contains(err.Error(), "held by another consumer") {
		t.Fatalf("redelivery: %v, %v; want retry later for the keyless messages only", res, err)
	}
	for k, want := range map[string]int{"fresh": 1, "late": 1, "done": 0, "busy": 1, "fail": 1, "panic": 1} {
		if c.applied[k] != want {
			t.Errorf("after redelivery, %s applied %d times, want %d", k, c.applied[k], want)
		}
	}
}

// TestBatchBusyDelayLevel checks the delay level a batch with busy keys
// asks for: the first level that covers the longest remaining lease among
// them, failed messages or not.
func TestBatchBusyDelayLevel(t *testing.T) {
	tests := []struct {
		name string
		// keys of the batch.
		keys      []string
		wantRes   rmq.ConsumeResult
		wantLevel int
	}{
		{"Fresh", []string{"a", "b"}, rmq.ConsumeSuccess, 0},
		{"Busy", []string{"a", "busy1h"}, rmq.ConsumeRetryLater, 17},      // 1h
		{"ShortBusy", []string{"busy90s", "a"}, rmq.ConsumeRetryLater, 6}, // 2m
		{"Longest", []string{"busy90s", "a", "busy1h"}, rmq.ConsumeRetryLater, 17},
		{"BusyAndFailed", []string{"busy90s", "fail"}, rmq.ConsumeRetryLater, 6},
		// A handler failure alone keeps the broker's back-off.
		{"Failed", []string{"a", "fail"}, rmq.ConsumeRetryLater, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := memdedupe.New(memdedupe.Config{})
			hold(t, store, "busy1h", time.Hour)
			hold(t, store, "busy90s", 90*time.Second)
			c, cb, _, _ := setup(t, store, noWait)
			c.fail["fail"] = errors.New("not yet")
			msgs := make([]*primitive.MessageExt, len(tt.keys))
			for i, k := range tt.keys {
				msgs[i] = msg(k)
			}
			cc := &primitive.ConsumeConcurrentlyContext{}
			res, err := cb(primitive.WithConcurrentlyCtx(context.Background(), cc), msgs...)
			if res != tt.wantRes {
				t.Errorf("got %v, %v; want %v", res, err, tt.wantRes)
			}
			if cc.DelayLevelWhenNextConsume != tt.wantLevel {
				t.Errorf("delay level %d, want %d", cc.DelayLevelWhenNextConsume, tt.wantLevel)
			}
		})
	}
}

// TestBatchStoreDown fails the store before a batch or while its handlers
// run, fail-closed and fail-open, then heals it and redelivers the batch.
func TestBatchStoreDown(t *testing.T) {
	failOpen := consumer.WithGuard(dedupe.GuardConfig{FailOpen: true})
	tests := []struct {
		name string
		opts []consumer.Option
		// inHandler injects the fault while the first message is handled
		// rather than before the batch.
		inHandler bool
		wantRes   rmq.ConsumeResult
		// stat is the count that must hold every message of the batch.
		stat func(*consumer.Stats) int64
		// applied is how often each key was applied after the batch, and
		// thenHeal after its redelivery to a healed store.
		applied, thenHeal int
	}{
		{"ClaimFailsClosed", nil, false, rmq.ConsumeRetryLater,
			func(s *consumer.Stats) int64 { return s.StoreDown.Load() }, 0, 1},
		{"ClaimFailsOpen", []consumer.Option{failOpen}, false, rmq.ConsumeSuccess,
			func(s *consumer.Stats) int64 { return s.Unguarded.Load() }, 1, 2},
		// The effects ran but were not recorded: acknowledging is the only
		// answer that does not run them again at once. A redelivery finds
		// the keys busy until their leases end. FailOpen is about claims,
		// so it changes nothing here.
		{"DownWhileHandlersRunFailsClosed", nil, true, rmq.ConsumeSuccess,
			func(s *consumer.Stats) int64 { return s.Unrecorded.Load() }, 1, 1},
		{"DownWhileHandlersRunFailsOpen", []consumer.Option{failOpen}, true, rmq.ConsumeSuccess,
			func(s *consumer.Stats) int64 { return s.Unrecorded.Load() }, 1, 1},
	}
	const n = 4
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := testkit.NewFaultStore(memdedupe.New(memdedupe.Config{}))
			cc, _ := newConsumer(t, fs, append(tt.opts, noWait, noStoreWait)...)
			c := newCounter()
			first := true
			cb := remoting.Concurrently(cc, func(ctx context.Context, m *consumer.Message) error {
				if tt.inHandler && first {
					fs.Inject(testkit.Fault{})
				}
				first = false
				return c.handle(ctx, m)
			})
			if !tt.inHandler {
				fs.Inject(testkit.Fault{})
			}
			msgs := batchOf(n)
			if res, err := cb(context.Background(), msgs...); res != tt.wantRes {
				t.Fatalf("got %v, %v; want %v", res, err, tt.wantRes)
			}
			if got := tt.stat(cc.Stats()); got != n {
				t.Errorf("counted %d, want %d", got, n)
			}
			fs.Heal()
			for _, want := range []int{tt.applied, tt.thenHeal} {
				for i := range n {
					if k := fmt.Sprint("k", i); c.count(k) != want {
						t.Errorf("%s applied %d times, want %d", k, c.count(k), want)
					}
				}
				cb(context.Background(), msgs...)
			}
		})
	}
}

// TestBatchPanic panics in one message of a batch: it alone fails, and the
// redelivery applies it while suppressing the others.
func TestBatchPanic(t *testing.T) {
	c, cb, stats, _ := setup(t, memdedupe.New(memdedupe.Config{}))
	c.panics["k1"] = true
	msgs := batchOf(3)
	res, err := cb(context.Background(), msgs...)
	var p *consumer.PanicError
	if res != rmq.ConsumeRetryLater || !errors.As(err, &p) || p.Value != "boom k1" {
		t.Fatalf("got %v, %v; want retry later with the panic", res, err)
	}
	delete(c.panics, "k1")
	if res, err := cb(context.Background(), msgs...); res != rmq.ConsumeSuccess {
		t.Fatalf("redelivery: %v, %v; want success", res, err)
	}
	for i := range 3 {
		if k := fmt.Sprint("k", i); c.count(k) != 1 {
			t.Errorf("%s applied %d times, want 1", k, c.count(k))
		}
	}
	if stats.Failed.Load() != 1 || stats.Suppressed.Load() != 2 {
		t.Errorf("failed %d, suppressed %d; want 1 and 2", stats.Failed.Load(), stats.Suppressed.Load())
	}
}

// roundTrips is a go-redis hook that counts the commands and pipelines sent.
type roundTrips struct{ n atomic.Int64 }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// TestBatchRedisRoundTrips counts what a real Redis receives for a batch of
// 32 messages.
func TestBatchRedisRoundTrips(t *testing.T) {
	store, rdb := newRedisStore(t, fmt.Sprintf("batch:%d-%d:", os.Getpid(), time.Now().UnixNano()))
	rt := new(roundTrips)
	rdb.AddHook(rt)
	c, cb, _, _ := setup(t, store)
	// Loads the scripts, so that the counts below do not depend on
	// whether Redis had them cached.
	c.fail["warm-fail"] = errors.New("no")
	cb(context.Background(), msg("warm-ok"), msg("warm-fail"))

	msgs := batchOf(32)
	c.fail["k7"] = errors.New("not yet")
	for _, step := range []struct {
		name    string
		wantRes rmq.ConsumeResult
		want    int64
	}{
		// On Redis 7 a claim is a pipeline of SET NX; the keys it finds
		// taken are read in a second round trip (redisdedupe's Claim).
		{"FirstDelivery", rmq.ConsumeRetryLater, 3}, // claim, complete, release
		{"Redelivery", rmq.ConsumeSuccess, 3},       // claim, read the done keys, complete k7
		{"Duplicate", rmq.ConsumeSuccess, 2},        // claim, read the done keys
	} {
		before := rt.n.Load()
		if res, err := cb(context.Background(), msgs...); res != step.wantRes {
			t.Fatalf("%s: got %v, %v; want %v", step.name, res, err, step.wantRes)
		}
		if got := rt.n.Load() - before; got != step.want {
			t.Errorf("%s: %d round trips, want %d", step.name, got, step.want)
		}
		delete(c.fail, "k7")
	}
	for i := range 32 {
		if k := fmt.Sprint("k", i); c.count(k) != 1 {
			t.Errorf("%s applied %d times, want 1", k, c.count(k))
		}
	}
}

// TestEndToEndBatchEachMessageAppliedOnce is TestEndToEndEachMessageAppliedOnce
// with the consumers handed batches of up to 16 messages.
func TestEndToEndBatchEachMessageAppliedOnce(t *testing.T) {
	if !inChild(t, broker4) {
		return
	}
	batched := endToEnd(t, broker4, concurrently, rmq.WithConsumeMessageBatchMaxSize(16))
	if batched == 0 {
		t.Error("no callback was given more than one message: the batch path was not exercised")
	}
}
