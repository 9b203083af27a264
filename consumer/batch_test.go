package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
)

// batchOf returns messages with keys k0 … k(n-1).
func batchOf(n int) []consumer.Message {
	ms := make([]consumer.Message, n)
	for i := range ms {
		ms[i] = msg(fmt.Sprint("k", i))
	}
	return ms
}

// TestBatchRoundTrips processes a batch of 32 fresh messages, then its
// redelivery: one claim and one completion in all, then one claim.
func TestBatchRoundTrips(t *testing.T) {
	fs := testkit.NewFaultStore(memdedupe.New(memdedupe.Config{}))
	c, l := newConsumer(t, fs), new(ledger)
	ms := batchOf(32)
	for _, want := range []struct {
		claims, completes int
		stat              func(consumer.Stats) int64
	}{
		{1, 1, func(s consumer.Stats) int64 { return s.Completed }},
		{2, 1, func(s consumer.Stats) int64 { return s.Suppressed }},
	} {
		if vs := process(c, l.handle, ms...); !acked(vs) {
			t.Fatalf("verdicts %+v; want Ack", vs)
		}
		if err := consumer.FlushCompletions(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		if got := want.stat(c.Stats()); got != 32 {
			t.Errorf("counted %d, want 32", got)
		}
		if n := fs.Calls(testkit.OpClaim); n != want.claims {
			t.Errorf("ClaimBatch called %d times, want %d", n, want.claims)
		}
		if n := fs.Calls(testkit.OpComplete); n != want.completes {
			t.Errorf("CompleteBatch called %d times, want %d", n, want.completes)
		}
		if n := fs.Calls(testkit.OpAll &^ (testkit.OpClaim | testkit.OpComplete)); n != 0 {
			t.Errorf("%d other store calls, want none", n)
		}
	}
	for i := range 32 {
		if k := fmt.Sprint("k", i); l.count(k) != 1 {
			t.Errorf("%s applied %d times, want 1", k, l.count(k))
		}
	}
}

// TestBatchMixed processes a batch that holds every kind of message: only
// those that must be retried are, and the redelivery applies each once.
func TestBatchMixed(t *testing.T) {
	store := memdedupe.New(memdedupe.Config{})
	fs := testkit.NewFaultStore(store)
	c, logs := logged(t, fs, consumer.WithBusyWait(time.Millisecond))
	done := new(ledger)
	if vs := process(c, done.handle, msg("done")); !acked(vs) {
		t.Fatal("could not complete a key")
	}
	if err := consumer.FlushCompletions(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	busy := hold(t, store, "busy", time.Hour)
	l := new(ledger)
	errDown := errors.New("db down")
	l.failing("fail", errDown)
	l.panicking("panic", true)
	batch := msgs("fresh", "done", "busy", "fail", strings.Repeat("x", 300), "", "panic", "fresh", "late")
	const phases = testkit.OpClaim | testkit.OpComplete | testkit.OpRelease
	calls, claims := fs.Calls(phases), fs.Calls(testkit.OpClaim)
	vs := process(c, l.handle, batch...)
	if err := consumer.FlushCompletions(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	err := errOf(vs)
	for _, want := range []error{msgkey.ErrInvalid, consumer.ErrNoKey, errDown} {
		if !errors.Is(err, want) {
			t.Errorf("error %v, want %v", err, want)
		}
	}
	var p *consumer.PanicError
	if !strings.Contains(err.Error(), "held by another consumer") || !errors.As(err, &p) {
		t.Errorf("error %v does not report the busy key and the panic", err)
	}
	// The busy key comes back no sooner than its lease ends: level 17 is
	// 1h.
	if vs[2].Level != 17 {
		t.Errorf("busy key's level %d, want 17", vs[2].Level)
	}
	for k, want := range map[string]int{"fresh": 1, "late": 1, "done": 0, "busy": 0, "fail": 0, "panic": 0} {
		if l.count(k) != want {
			t.Errorf("%s applied %d times, want %d", k, l.count(k), want)
		}
	}
	stats := c.Stats()
	for name, got := range map[string]int64{
		"Delivered": stats.Delivered, "Completed": stats.Completed, "Suppressed": stats.Suppressed,
		"Failed": stats.Failed, "Busy": stats.Busy, "Waited": stats.Waited, "InvalidKey": stats.InvalidKey,
		"NoKey": stats.NoKey, "StoreDown": stats.StoreDown,
	} {
		want := map[string]int64{
			"Delivered": 1 + 9, "Completed": 1 + 2, "Suppressed": 2, // done, and fresh repeated
			"Failed": 2, "Busy": 1, "Waited": 1, "StoreDown": 0,
			"InvalidKey": 2, "NoKey": 1, // no key, and an invalid one
		}[name]
		if got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	var loud []logRecord
	debug := 0
	for _, r := range records(logs) {
		if r.level >= slog.LevelInfo {
			loud = append(loud, r)
		} else if strings.Contains(r.msg, "duplicate suppressed") {
			debug++
		}
	}
	if len(loud) != 2 || !strings.Contains(loud[0].msg+loud[1].msg, "message key cannot be deduplicated") {
		t.Errorf("logged %+v, want the two messages without a usable key", loud)
	}
	if debug != 2 {
		t.Errorf("%d debug records of a suppressed duplicate, want 2 (done, and fresh repeated)", debug)
	}
	// One round trip per phase; the busy key is asked about again, alone,
	// after its wait.
	if n := fs.Calls(phases) - calls; n != 3+1 {
		t.Errorf("%d store calls, want 4 (claim, complete, release, and the busy key's claim after its wait)", n)
	}
	if n := fs.Calls(testkit.OpClaim) - claims; n != 1+1 {
		t.Errorf("%d claims, want 2 (the batch's and the busy key's after its wait)", n)
	}

	// The client redelivers the whole batch once the failures are gone.
	if err := testkit.Release(context.Background(), store, busy); err != nil {
		t.Fatal(err)
	}
	l.failing("fail", nil)
	l.panicking("panic", false)
	err = errOf(process(c, l.handle, batch...))
	if !errors.Is(err, msgkey.ErrInvalid) || !errors.Is(err, consumer.ErrNoKey) || strings.Contains(err.Error(), "held by another consumer") {
		t.Fatalf("redelivery: %v; want retries for the keyless messages only", err)
	}
	for k, want := range map[string]int{"fresh": 1, "late": 1, "done": 0, "busy": 1, "fail": 1, "panic": 1} {
		if l.count(k) != want {
			t.Errorf("after redelivery, %s applied %d times, want %d", k, l.count(k), want)
		}
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
		ack       bool
		// stat is the count that must hold every message of the batch.
		stat func(consumer.Stats) int64
		// applied is how often each key was applied after the batch, and
		// thenHeal after its redelivery to a healed store.
		applied, thenHeal int
	}{
		{"ClaimFailsClosed", nil, false, false,
			func(s consumer.Stats) int64 { return s.StoreDown }, 0, 1},
		{"ClaimFailsOpen", []consumer.Option{failOpen}, false, true,
			func(s consumer.Stats) int64 { return s.Unguarded }, 1, 2},
		// The effects ran but were not recorded: acknowledging is the only
		// answer that does not run them again at once. A redelivery finds
		// the keys busy until their leases end. FailOpen is about claims,
		// so it changes nothing here.
		{"DownWhileHandlersRunFailsClosed", nil, true, true,
			func(s consumer.Stats) int64 { return s.Unrecorded }, 1, 1},
		{"DownWhileHandlersRunFailsOpen", []consumer.Option{failOpen}, true, true,
			func(s consumer.Stats) int64 { return s.Unrecorded }, 1, 1},
	}
	const n = 4
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := testkit.NewFaultStore(memdedupe.New(memdedupe.Config{}))
			c := newConsumer(t, fs, append(tt.opts, consumer.WithBusyWait(time.Millisecond), consumer.WithStoreDownWait(time.Nanosecond))...)
			l := new(ledger)
			first := true
			h := func(ctx context.Context, m *consumer.Message) error {
				if tt.inHandler && first {
					fs.Inject(testkit.Fault{})
				}
				first = false
				return l.handle(ctx, m)
			}
			if !tt.inHandler {
				fs.Inject(testkit.Fault{})
			}
			ms := batchOf(n)
			if vs := process(c, h, ms...); acked(vs) != tt.ack {
				t.Fatalf("verdicts %+v; want acknowledged: %v", vs, tt.ack)
			}
			// Failed completions are reported once the deferred ones
			// are flushed.
			if err := consumer.FlushCompletions(t.Context(), c); err != nil {
				t.Fatal(err)
			}
			if got := tt.stat(c.Stats()); got != n {
				t.Errorf("counted %d, want %d", got, n)
			}
			fs.Heal()
			for _, want := range []int{tt.applied, tt.thenHeal} {
				for i := range n {
					if k := fmt.Sprint("k", i); l.count(k) != want {
						t.Errorf("%s applied %d times, want %d", k, l.count(k), want)
					}
				}
				process(c, h, ms...)
			}
		})
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
	rdb := redis.NewClient(&redis.Options{Addr: testenv.Redis(t)})
	t.Cleanup(func() { rdb.Close() })
	store, err := redisdedupe.New(rdb, redisdedupe.Config{Prefix: fmt.Sprintf("batch:%d-%d:", os.Getpid(), time.Now().UnixNano())})
	if err != nil {
		t.Fatal(err)
	}
	// Opens connections for a deferred completion and a release sent at
	// once, before counting: a new connection's handshake is counted too.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { rdb.Ping(t.Context()) })
	}
	wg.Wait()
	rt := new(roundTrips)
	rdb.AddHook(rt)
	c, l := newConsumer(t, store), new(ledger)
	// Loads the scripts, so that the counts below do not depend on
	// whether Redis had them cached.
	l.failing("warm-fail", errors.New("no"))
	process(c, l.handle, msgs("warm-ok", "warm-fail")...)
	if err := consumer.FlushCompletions(t.Context(), c); err != nil {
		t.Fatal(err)
	}

	ms := batchOf(32)
	l.failing("k7", errors.New("not yet"))
	for _, step := range []struct {
		name string
		ack  bool
		want int64
	}{
		// On Redis 7 a claim is a pipeline of SET NX; the keys it finds
		// taken are read in a second round trip (redisdedupe's Claim).
		{"FirstDelivery", false, 3}, // claim, complete, release
		{"Redelivery", true, 3},     // claim, read the done keys, complete k7
		{"Duplicate", true, 2},      // claim, read the done keys
	} {
		before := rt.n.Load()
		if vs := process(c, l.handle, ms...); acked(vs) != step.ack {
			t.Fatalf("%s: %v; want acknowledged: %v", step.name, errOf(vs), step.ack)
		}
		// The completions go after the verdicts.
		if err := consumer.FlushCompletions(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		if got := rt.n.Load() - before; got != step.want {
			t.Errorf("%s: %d round trips, want %d", step.name, got, step.want)
		}
		l.failing("k7", nil)
	}
	for i := range 32 {
		if k := fmt.Sprint("k", i); l.count(k) != 1 {
			t.Errorf("%s applied %d times, want 1", k, l.count(k))
		}
	}
}
