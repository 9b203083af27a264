package remoting_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/internal/dedupekit"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/remoting"
)

// logRecord is one record a testkit.Logs kept.
type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]any
}

// records returns what l kept as logRecords.
func records(l *testkit.Logs) []logRecord {
	var out []logRecord
	for _, rec := range l.Records() {
		lr := logRecord{level: rec.Level, msg: rec.Message, attrs: map[string]any{}}
		rec.Attrs(func(a slog.Attr) bool {
			lr.attrs[a.Key] = a.Value.Any()
			return true
		})
		out = append(out, lr)
	}
	return out
}

// recordDone records key done for testGroup in store with fingerprint fp,
// as a consumer that ran it would have.
func recordDone(t *testing.T, store dedupe.Store, key, fp string) {
	t.Helper()
	ref := dedupe.Ref{Group: testGroup, Key: key}
	res, err := testkit.Claim(t.Context(), store, dedupe.Item{Ref: ref, Fingerprint: fp}, time.Minute)
	if err != nil || res.Outcome != dedupe.Acquired {
		t.Fatalf("claim %s = %v, %v", key, res.Outcome, err)
	}
	if err := testkit.Complete(t.Context(), store, dedupe.Ticket{Ref: ref, Token: res.Token}, time.Hour); err != nil {
		t.Fatal(err)
	}
}

// terminal returns the counters of which every delivered message ends in
// exactly one.
func terminal(s *consumer.Stats) map[string]*atomic.Int64 {
	return map[string]*atomic.Int64{
		"Completed": &s.Completed, "Suppressed": &s.Suppressed, "Failed": &s.Failed, "Busy": &s.Busy,
		"Reused": &s.Reused, "StoreDown": &s.StoreDown, "InvalidKey": &s.InvalidKey, "LeaseLost": &s.LeaseLost,
		"Unrecorded": &s.Unrecorded, "Unguarded": &s.Unguarded, "Held": &s.Canceled,
	}
}

// checkTotals fails unless every delivered message was counted once among
// the terminal counters.
func checkTotals(t *testing.T, s *consumer.Stats) {
	t.Helper()
	var sum int64
	for _, c := range terminal(s) {
		sum += c.Load()
	}
	if d := s.Delivered.Load(); sum != d {
		t.Errorf("delivered %d messages, counted %d among the outcomes", d, sum)
	}
}

// outcomeEnv is what a row of TestOutcomes arranges: a fault store over a
// memdedupe store on a clock of its own, and a way to cancel the
// callback's context.
type outcomeEnv struct {
	clk    *testkit.Clock
	mem    *memdedupe.Store
	fs     *testkit.FaultStore
	cancel context.CancelFunc
}

// TestOutcomes produces every outcome of the guard for a message with key
// k and checks what the decision table makes of it: the callback's answer,
// the one counter it increments, and whether and how it is logged.
func TestOutcomes(t *testing.T) {
	failOpen := consumer.WithGuard(dedupe.GuardConfig{FailOpen: true})
	tests := []struct {
		name    string
		outcome dedupe.Outcome
		opts    []consumer.Option
		// arrange prepares e and returns the messages of the delivery;
		// nil delivers msg("k").
		arrange func(t *testing.T, e *outcomeEnv) []*primitive.MessageExt
		// handler, if set, runs in place of one that applies every
		// message.
		handler func(e *outcomeEnv) consumer.Handler
		ack     bool
		counter func(*consumer.Stats) *atomic.Int64
		// level and fix describe the one record logged, for logged rows;
		// key is the key it names ("k" unless set).
		logged bool
		level  slog.Level
		fix    string
		key    *string
		// withErr: the record's err is set.
		withErr bool
		// outage: the record is the outage's, logged when claims begin to
		// fail, which names the group and no message.
		outage    bool
		skipOrder bool // orderly consumers wait for busy keys and the store
		delay     int  // the delay level asked for
	}{{
		name: "Completed", outcome: dedupe.Completed, ack: true,
		counter: func(s *consumer.Stats) *atomic.Int64 { return &s.Completed },
	}, {
		name: "Suppressed", outcome: dedupe.Suppressed, ack: true,
		arrange: func(t *testing.T, e *outcomeEnv) []*primitive.MessageExt {
			recordDone(t, e.mem, "k", dedupekit.Fingerprint(msg("k").Body))
			return nil
		},
		counter: func(s *consumer.Stats) *atomic.Int64 { return &s.Suppressed },
	}, {
		name: "Failed", outcome: dedupe.Failed,
		handler: func(*outcomeEnv) consumer.Handler {
			return func(context.Context, *consumer.Message) error { return errors.New("declined") }
		},
		counter: func(s *consumer.Stats) *atomic.Int64 { return &s.Failed },
	}, {
		name: "FailedByPanic", outcome: dedupe.Failed,
		handler: func(*outcomeEnv) consumer.Handler {
			return func(context.Context, *consumer.Message) error { panic("boom") }
		},
		counter: func(s *consumer.Stats) *atomic.Int64 { return &s.Failed },
	}, {
		name: "Busy", outcome: dedupe.Busy, opts: []consumer.Option{noWait},
		arrange: func(t *testing.T, e *outcomeEnv) []*primitive.MessageExt {
			hold(t, e.mem, "k", 90*time.Second)
			return nil
		},
		counter:   func(s *consumer.Stats) *atomic.Int64 { return &s.Busy },
		skipOrder: true, delay: 6, // 2m, the first level no shorter than 90s
	}, {
		name: "Reused", outcome: dedupe.Reused,
		arrange: func(t *testing.T, e *outcomeEnv) []*primitive.MessageExt {
			recordDone(t, e.mem, "k", dedupekit.Fingerprint([]byte("another body")))
			return nil
		},
		counter: func(s *consumer.Stats) *atomic.Int64 { return &s.Reused },
		logged:  true, level: slog.LevelError, fix: "WithoutFingerprint",
	}, {
		name: "StoreDown", outcome: dedupe.StoreDown, opts: []consumer.Option{noStoreWait},
		arrange: func(t *testing.T, e *outcomeEnv) []*primitive.MessageExt {
			e.fs.Inject(testkit.Fault{Ops: testkit.OpClaim})
			return nil
		},
		counter: func(s *consumer.Stats) *atomic.Int64 { return &s.StoreDown },
		logged:  true, level: slog.LevelWarn, fix: "reachable", withErr: true, outage: true,
		skipOrder: true,
	}, {
		name: "InvalidKeyMissing", outcome: dedupe.InvalidKey,
		arrange: func(*testing.T, *outcomeEnv) []*primitive.MessageExt {
			return []*primitive.MessageExt{msg("")}
		},
		counter: func(s *consumer.Stats) *atomic.Int64 { return &s.InvalidKey },
		logged:  true, level: slog.LevelError, fix: "WithKeyFallback", key: new(string), withErr: true,
	}, {
		name: "InvalidKeyTooLong", outcome: dedupe.InvalidKey,
		arrange: func(*testing.T, *outcomeEnv) []*primitive.MessageExt {
			return []*primitive.MessageExt{msg(longKey)}
		},
		counter: func(s *consumer.Stats) *atomic.Int64 { return &s.InvalidKey },
		logged:  true, level: slog.LevelError, fix: "WithKeyFallback", key: &longKey, withErr: true,
	}, {
		// The store's clock passes the lease while the handler runs, as if
		// the consumer had stalled: the key may have been run elsewhere.
		name: "LeaseLost", outcome: dedupe.LeaseLost, ack: true,
		handler: func(e *outcomeEnv) consumer.Handler {
			return func(context.Context, *consumer.Message) error {
				e.clk.Add(time.Minute)
				return nil
			}
		},
		counter: func(s *consumer.Stats) *atomic.Int64 { return &s.LeaseLost },
		logged:  true, level: slog.LevelError, fix: "Lease", withErr: true,
	}, {
		name: "Unrecorded", outcome: dedupe.Unrecorded, ack: true,
		arrange: func(t *testing.T, e *outcomeEnv) []*primitive.MessageExt {
			e.fs.Inject(testkit.Fault{Ops: testkit.OpComplete})
			return nil
		},
		counter: func(s *consumer.Stats) *atomic.Int64 { return &s.Unrecorded },
		logged:  true, level: slog.LevelError, fix: "reachable", withErr: true,
	}, {
		name: "Unguarded", outcome: dedupe.Unguarded, ack: true, opts: []consumer.Option{failOpen},
		arrange: func(t *testing.T, e *outcomeEnv) []*primitive.MessageExt {
			e.fs.Inject(testkit.Fault{Ops: testkit.OpClaim})
			return nil
		},
		counter: func(s *consumer.Stats) *atomic.Int64 { return &s.Unguarded },
		logged:  true, level: slog.LevelWarn, fix: "reachable", withErr: true,
	}, {
		// The callback's context ends while the first message of the batch
		// runs: k's turn never comes. Outside a drain, it is retried.
		name: "Canceled", outcome: dedupe.Canceled,
		arrange: func(*testing.T, *outcomeEnv) []*primitive.MessageExt {
			return []*primitive.MessageExt{msg("first"), msg("k")}
		},
		handler: func(e *outcomeEnv) consumer.Handler {
			return func(_ context.Context, m *consumer.Message) error {
				if msgkey.Of(m) == "first" {
					e.cancel()
				}
				return nil
			}
		},
		counter: func(s *consumer.Stats) *atomic.Int64 { return &s.Canceled },
	}}

	covered := map[dedupe.Outcome]bool{}
	for _, tt := range tests {
		covered[tt.outcome] = true
	}
	for o := dedupe.Completed; o <= dedupe.Canceled; o++ { // every outcome of a Guard
		if !covered[o] {
			t.Errorf("no row produces outcome %v", o)
		}
	}

	modes := []struct {
		name     string
		callback func(*consumer.Consumer, consumer.Handler) remoting.Callback
		retry    rmq.ConsumeResult
	}{
		{"Concurrently", remoting.Concurrently, rmq.ConsumeRetryLater},
		{"Orderly", orderly, rmq.SuspendCurrentQueueAMoment},
	}
	for _, mode := range modes {
		for _, tt := range tests {
			if tt.skipOrder && mode.name == "Orderly" {
				continue
			}
			t.Run(mode.name+"/"+tt.name, func(t *testing.T) {
				clk := testkit.NewClock(time.Unix(1_700_000_000, 0), 0)
				mem := memdedupe.New(memdedupe.Config{Now: clk.Now})
				e := &outcomeEnv{clk: clk, mem: mem, fs: testkit.NewFaultStore(mem)}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				e.cancel = cancel
				rec := new(testkit.Logs)
				c, err := consumer.New(e.fs, testGroup, append([]consumer.Option{consumer.WithLogger(slog.New(rec))}, tt.opts...)...)
				if err != nil {
					t.Fatal(err)
				}
				msgs := []*primitive.MessageExt{msg("k")}
				if tt.arrange != nil {
					if m := tt.arrange(t, e); m != nil {
						msgs = m
					}
				}
				h := newCounter().handle
				if tt.handler != nil {
					h = tt.handler(e)
				}
				cc := &primitive.ConsumeConcurrentlyContext{}
				ctx = primitive.WithConcurrentlyCtx(ctx, cc)
				res, err := mode.callback(c, h)(ctx, msgs...)

				want := mode.retry
				if tt.ack {
					want = rmq.ConsumeSuccess
				}
				if res != want || (err == nil) != tt.ack {
					t.Errorf("callback = %v, %v; want %v", res, err, want)
				}
				if cc.DelayLevelWhenNextConsume != tt.delay {
					t.Errorf("delay level %d, want %d", cc.DelayLevelWhenNextConsume, tt.delay)
				}
				stats := c.Stats()
				if got := tt.counter(stats).Load(); got != 1 {
					t.Errorf("counter = %d, want 1", got)
				}
				checkTotals(t, stats)
				if retried := stats.Retried.Load(); (retried == 0) != tt.ack {
					t.Errorf("retried %d messages of an answer %v", retried, res)
				}

				recs := records(rec)
				if !tt.logged {
					if len(recs) != 0 {
						t.Errorf("logged %+v, want nothing", recs)
					}
					return
				}
				if len(recs) != 1 {
					t.Fatalf("logged %+v, want one record", recs)
				}
				r := recs[0]
				key := "k"
				if tt.key != nil {
					key = *tt.key
				}
				if r.level != tt.level || !strings.HasPrefix(r.msg, "idemq: ") {
					t.Errorf("logged %v %q, want level %v", r.level, r.msg, tt.level)
				}
				switch {
				case tt.outage:
					if r.attrs["group"] != testGroup || r.attrs["key"] != nil || r.attrs["msgId"] != nil {
						t.Errorf("logged %v, want group %q and no message", r.attrs, testGroup)
					}
				case r.attrs["group"] != testGroup || r.attrs["key"] != key || r.attrs["msgId"] != msgs[len(msgs)-1].MsgId || r.attrs["topic"] != "orders":
					t.Errorf("logged %v, want group %q, key %q, msgId and topic", r.attrs, testGroup, key)
				}
				if fix, _ := r.attrs["fix"].(string); !strings.Contains(fix, tt.fix) {
					t.Errorf("logged fix %q, want one that says %q", fix, tt.fix)
				}
				if got := r.attrs["err"] != nil; got != tt.withErr {
					t.Errorf("logged err %v, want one: %v", r.attrs["err"], tt.withErr)
				}
			})
		}
	}
}

// longKey is one byte over the limit.
var longKey = strings.Repeat("x", msgkey.MaxLen+1)

// TestEndedContextIsNotStoreDown delivers with a context that has already
// ended, as a drain out of time leaves the callbacks still claiming: the
// store did not fail, so the message must not be reported as if it had.
func TestEndedContextIsNotStoreDown(t *testing.T) {
	rec := new(testkit.Logs)
	c, err := consumer.New(memdedupe.New(memdedupe.Config{}), testGroup, consumer.WithLogger(slog.New(rec)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := remoting.Concurrently(c, newCounter().handle)(ctx, msg("k"))
	if res != rmq.ConsumeRetryLater || !errors.Is(err, context.Canceled) {
		t.Errorf("callback = %v, %v; want retry later with context.Canceled", res, err)
	}
	s := c.Stats()
	if s.StoreDown.Load() != 0 || s.Canceled.Load() != 1 {
		t.Errorf("store down %d, held %d; want 0 and 1 (canceled)", s.StoreDown.Load(), s.Canceled.Load())
	}
	if recs := records(rec); len(recs) != 0 {
		t.Errorf("logged %+v, want nothing: the store is fine", recs)
	}
}
