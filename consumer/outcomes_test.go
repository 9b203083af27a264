package consumer_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/internal/adapter"
	"github.com/idemq/idemq/internal/dedupekit"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
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

// outcomeEnv is what a row of TestOutcomes arranges: a store on a clock of
// its own that a row may fail, and a way to cancel the delivery's context.
type outcomeEnv struct {
	clk    *testkit.Clock
	mem    *memdedupe.Store
	down   map[string]bool // the store calls that fail: "claim", "complete"
	cancel context.CancelFunc
}

// longKey is one byte over the limit.
var longKey = strings.Repeat("x", msgkey.MaxLen+1)

// TestOutcomes produces every outcome of the guard for a message with key
// k and checks what the decision table makes of it: the verdict, the one
// counter it increments, and whether and how it is logged.
func TestOutcomes(t *testing.T) {
	failOpen := consumer.WithGuard(dedupe.GuardConfig{FailOpen: true})
	tests := []struct {
		name    string
		outcome dedupe.Outcome
		opts    []consumer.Option
		// arrange prepares e and returns the messages of the delivery, the
		// last one the row's; nil delivers msg("k").
		arrange func(t *testing.T, e *outcomeEnv) []consumer.Message
		// handler, if set, runs in place of one that applies every
		// message.
		handler func(e *outcomeEnv) consumer.Handler
		act     adapter.Action
		counter func(consumer.Stats) int64
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
		outage bool
		// late: the store sends completions with claims, so the
		// Consumer defers them, and the outcome comes after the verdict,
		// which answers Completed: the deferred completion failed,
		// reported once the Consumer's completions are flushed, logged
		// with the group and key and no message.
		late  bool
		delay int    // the delay level of a retry (else that of a first attempt, 1)
		is    error  // the verdict's error wraps it
		says  string // the verdict's error says it
	}{{
		name: "Completed", outcome: dedupe.Completed, act: adapter.Ack,
		counter: func(s consumer.Stats) int64 { return s.Completed },
	}, {
		name: "Suppressed", outcome: dedupe.Suppressed, act: adapter.Ack,
		arrange: func(t *testing.T, e *outcomeEnv) []consumer.Message {
			recordDone(t, e.mem, "k", dedupekit.Fingerprint(msg("k").Body))
			return nil
		},
		counter: func(s consumer.Stats) int64 { return s.Suppressed },
		// As designed: debug, never louder.
		logged: true, level: slog.LevelDebug,
	}, {
		name: "Failed", outcome: dedupe.Failed, act: adapter.Retry, says: "declined",
		handler: func(*outcomeEnv) consumer.Handler {
			return func(context.Context, *consumer.Message) error { return errors.New("declined") }
		},
		counter: func(s consumer.Stats) int64 { return s.Failed },
	}, {
		name: "FailedByPanic", outcome: dedupe.Failed, act: adapter.Retry, says: "handler panicked: boom",
		handler: func(*outcomeEnv) consumer.Handler {
			return func(context.Context, *consumer.Message) error { panic("boom") }
		},
		counter: func(s consumer.Stats) int64 { return s.Failed },
	}, {
		name: "Busy", outcome: dedupe.Busy, act: adapter.Retry, says: "held by another consumer",
		opts: []consumer.Option{consumer.WithBusyWait(time.Millisecond)},
		arrange: func(t *testing.T, e *outcomeEnv) []consumer.Message {
			hold(t, e.mem, "k", 90*time.Second)
			return nil
		},
		counter: func(s consumer.Stats) int64 { return s.Busy },
		delay:   6, // 2m, the first level no shorter than 90s
	}, {
		name: "Reused", outcome: dedupe.Reused, act: adapter.Retry, says: "reused",
		arrange: func(t *testing.T, e *outcomeEnv) []consumer.Message {
			recordDone(t, e.mem, "k", dedupekit.Fingerprint([]byte("another body")))
			return nil
		},
		counter: func(s consumer.Stats) int64 { return s.Reused },
		logged:  true, level: slog.LevelError, fix: "WithoutFingerprint",
	}, {
		name: "StoreDown", outcome: dedupe.StoreDown, act: adapter.Retry,
		opts: []consumer.Option{consumer.WithStoreDownWait(time.Nanosecond)},
		arrange: func(t *testing.T, e *outcomeEnv) []consumer.Message {
			e.down["claim"] = true
			return nil
		},
		counter: func(s consumer.Stats) int64 { return s.StoreDown },
		logged:  true, level: slog.LevelWarn, fix: "reachable", withErr: true, outage: true,
	}, {
		name: "InvalidKeyMissing", outcome: dedupe.InvalidKey, act: adapter.Retry, is: consumer.ErrNoKey,
		arrange: func(*testing.T, *outcomeEnv) []consumer.Message {
			return msgs("")
		},
		counter: func(s consumer.Stats) int64 { return s.InvalidKey },
		logged:  true, level: slog.LevelError, fix: "WithKeyFallback", key: new(string), withErr: true,
	}, {
		name: "InvalidKeyTooLong", outcome: dedupe.InvalidKey, act: adapter.Retry, is: msgkey.ErrInvalid,
		arrange: func(*testing.T, *outcomeEnv) []consumer.Message {
			return msgs(longKey)
		},
		counter: func(s consumer.Stats) int64 { return s.InvalidKey },
		logged:  true, level: slog.LevelError, fix: "WithKeyFallback", key: &longKey, withErr: true,
	}, {
		// The store's clock passes the lease while the handler runs, as if
		// the consumer had stalled: the key may have been run elsewhere.
		name: "LeaseLost", outcome: dedupe.LeaseLost, act: adapter.Ack,
		handler: func(e *outcomeEnv) consumer.Handler {
			return func(context.Context, *consumer.Message) error {
				e.clk.Add(time.Minute)
				return nil
			}
		},
		counter: func(s consumer.Stats) int64 { return s.LeaseLost },
		logged:  true, level: slog.LevelError, fix: "Lease", withErr: true,
	}, {
		name: "Unrecorded", outcome: dedupe.Unrecorded, act: adapter.Ack,
		arrange: func(t *testing.T, e *outcomeEnv) []consumer.Message {
			e.down["complete"] = true
			return nil
		},
		counter: func(s consumer.Stats) int64 { return s.Unrecorded },
		logged:  true, level: slog.LevelError, fix: "reachable", withErr: true,
	}, {
		name: "Unguarded", outcome: dedupe.Unguarded, act: adapter.Ack, opts: []consumer.Option{failOpen},
		arrange: func(t *testing.T, e *outcomeEnv) []consumer.Message {
			e.down["claim"] = true
			return nil
		},
		counter: func(s consumer.Stats) int64 { return s.Unguarded },
		logged:  true, level: slog.LevelWarn, fix: "reachable", withErr: true,
	}, {
		// The delivery's context ends while its first message runs: k's
		// turn never comes. Outside a drain, it is left to the client.
		name: "Canceled", outcome: dedupe.Canceled, act: adapter.Hold, is: context.Canceled,
		arrange: func(*testing.T, *outcomeEnv) []consumer.Message {
			return msgs("first", "k")
		},
		handler: func(e *outcomeEnv) consumer.Handler {
			return func(_ context.Context, m *consumer.Message) error {
				if msgkey.Of(m) == "first" {
					e.cancel()
				}
				return nil
			}
		},
		counter: func(s consumer.Stats) int64 { return s.Canceled },
	}}
	// The completions that fail, again over a store that sends them with
	// claims: deferred, they fail after the verdict.
	for _, tt := range tests {
		if tt.outcome == dedupe.LeaseLost || tt.outcome == dedupe.Unrecorded {
			tt.name, tt.late = tt.name+"/deferred", true
			tests = append(tests, tt)
		}
	}

	covered := map[dedupe.Outcome]bool{}
	for _, tt := range tests {
		covered[tt.outcome] = true
	}
	for o := dedupe.Completed; o <= dedupe.Canceled; o++ { // every outcome of a Guard
		if !covered[o] {
			t.Errorf("no row produces outcome %v", o)
		}
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := testkit.NewClock(time.Unix(1_700_000_000, 0), 0)
			e := &outcomeEnv{clk: clk, mem: memdedupe.New(memdedupe.Config{Now: clk.Now}), down: map[string]bool{}}
			fail := func(call string) error {
				if e.down[call] {
					return errors.New("store down")
				}
				return nil
			}
			store := &testkit.HookStore{Store: e.mem, Hooks: testkit.StoreHooks{
				Claim:    func(context.Context, []dedupe.Item) error { return fail("claim") },
				Complete: func(context.Context, []dedupe.Ticket) error { return fail("complete") },
				Extend:   func(context.Context, dedupe.Ticket) error { return fail("claim") }, // the outage's probe
			}}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			e.cancel = cancel
			var st dedupe.Store = store
			if tt.late {
				st = riding{store}
			}
			c, logs := logged(t, st, tt.opts...)
			ms := msgs("k")
			if tt.arrange != nil {
				if m := tt.arrange(t, e); m != nil {
					ms = m
				}
			}
			h := new(ledger).handle
			if tt.handler != nil {
				h = tt.handler(e)
			}
			vs := adapter.Process(ctx, c, ms, h, adapter.Waiting{}, nil)
			v := vs[len(vs)-1]

			delay := tt.delay
			if delay == 0 && tt.act == adapter.Retry {
				delay = 1
			}
			verdict := tt.outcome
			if tt.late {
				verdict = dedupe.Completed
				if err := consumer.FlushCompletions(ctx, c); err != nil {
					t.Fatal(err)
				}
			}
			if v.Action != tt.act || v.Outcome != verdict || v.Level != delay || (v.Err == nil) != (tt.act == adapter.Ack) {
				t.Errorf("verdict %+v; want %v %v at level %d", v, tt.act, verdict, delay)
			}
			if tt.is != nil && !errors.Is(v.Err, tt.is) || tt.says != "" && (v.Err == nil || !strings.Contains(v.Err.Error(), tt.says)) {
				t.Errorf("error %v; want one that wraps %v and says %q", v.Err, tt.is, tt.says)
			}
			stats := c.Stats()
			if got := tt.counter(stats); got != 1 {
				t.Errorf("counter = %d, want 1", got)
			}
			checkTotals(t, stats)
			if noKey := stats.NoKey; (noKey == 1) != (tt.name == "InvalidKeyMissing") {
				t.Errorf("counted %d without a key", noKey)
			}
			if retried := stats.Retried; (retried == 0) != (tt.act == adapter.Ack) {
				t.Errorf("retried %d messages of a verdict %v", retried, v.Action)
			}

			recs := records(logs)
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
			case tt.late:
				if r.attrs["group"] != testGroup || r.attrs["key"] != key || r.attrs["msgId"] != nil {
					t.Errorf("logged %v, want group %q, key %q and no message", r.attrs, testGroup, key)
				}
			case tt.outage:
				if r.attrs["group"] != testGroup || r.attrs["key"] != nil || r.attrs["msgId"] != nil {
					t.Errorf("logged %v, want group %q and no message", r.attrs, testGroup)
				}
			case r.attrs["group"] != testGroup || r.attrs["key"] != key || r.attrs["msgId"] != ms[len(ms)-1].ID || r.attrs["topic"] != "orders":
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

// TestEndedContextIsNotStoreDown delivers with a context that has already
// ended, as a drain out of time leaves the callbacks still claiming: the
// store did not fail, so the message must not be reported as if it had.
func TestEndedContextIsNotStoreDown(t *testing.T) {
	c, logs := logged(t, memdedupe.New(memdedupe.Config{}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	v := adapter.Process(ctx, c, msgs("k"), new(ledger).handle, adapter.Waiting{}, nil)[0]
	if v.Action != adapter.Hold || !errors.Is(v.Err, context.Canceled) {
		t.Errorf("verdict %+v; want Hold with context.Canceled", v)
	}
	s := c.Stats()
	if s.StoreDown != 0 || s.Canceled != 1 {
		t.Errorf("store down %d, held %d; want 0 and 1 (canceled)", s.StoreDown, s.Canceled)
	}
	if recs := records(logs); len(recs) != 0 {
		t.Errorf("logged %+v, want nothing: the store is fine", recs)
	}
}

// TestFailureIsRetriedNotLost fails a handler with an error or a panic:
// the message is retried with the error (a panic's value and stack), its
// claim released, so that the redelivery runs it at once.
func TestFailureIsRetriedNotLost(t *testing.T) {
	for _, panics := range []bool{false, true} {
		l := new(ledger)
		c := newConsumer(t, memdedupe.New(memdedupe.Config{}))
		l.failing("k", errors.New("db down"))
		l.panicking("k", panics)
		v := process(c, l.handle, msg("k"))[0]
		var p *consumer.PanicError
		if v.Action != adapter.Retry || panics != (errors.As(v.Err, &p) && p.Value == "boom k" && len(p.Stack) > 0) {
			t.Fatalf("panics %v: verdict %+v; want Retry, with a PanicError with the value and a stack if it panicked", panics, v)
		}
		l.failing("k", nil)
		l.panicking("k", false)
		if vs := process(c, l.handle, msg("k")); !acked(vs) || l.count("k") != 1 || c.Stats().Failed != 1 {
			t.Fatalf("redelivery %+v, applied %d, failed %d; want Ack, 1 and 1", vs, l.count("k"), c.Stats().Failed)
		}
	}
}

// TestScopes runs one key for two groups and for two namespaces: each
// runs it once, a namespace again suppresses it.
func TestScopes(t *testing.T) {
	store := memdedupe.New(memdedupe.Config{})
	l := new(ledger)
	for _, scope := range []struct {
		group string
		opts  []consumer.Option
	}{{"group-a", nil}, {"group-b", nil}, {testGroup, []consumer.Option{consumer.WithNamespace("app-1")}},
		{testGroup, []consumer.Option{consumer.WithNamespace("app-2")}}, {testGroup, []consumer.Option{consumer.WithNamespace("app-1")}}} {
		c, err := consumer.New(store, scope.group, scope.opts...)
		if err != nil {
			t.Fatal(err)
		}
		if vs := process(c, l.handle, msg("k")); !acked(vs) {
			t.Fatalf("group %s: %+v", scope.group, vs)
		}
	}
	if l.count("k") != 4 {
		t.Fatalf("applied %d times across two groups and two namespaces, want 4", l.count("k"))
	}
}

// TestStatsIsASnapshot checks that Stats returns a value that later
// messages do not change.
func TestStatsIsASnapshot(t *testing.T) {
	c := newConsumer(t, memdedupe.New(memdedupe.Config{}))
	before := c.Stats()
	process(c, new(ledger).handle, msg("k"))
	if s := c.Stats(); s.Completed != 1 || s.Delivered != 1 || before.Completed != 0 || before.Delivered != 0 {
		t.Fatalf("completed %d, delivered %d, and %d, %d in the snapshot taken before; want 1, 1, 0, 0",
			s.Completed, s.Delivered, before.Completed, before.Delivered)
	}
}

// riding is a store that sends completions with claims, one call after
// the other: a Consumer defers its completions over it.
type riding struct{ dedupe.Store }

func (r riding) CompleteClaim(ctx context.Context, ts []dedupe.Ticket, retention time.Duration, items []dedupe.Item, lease time.Duration) ([]error, error, []dedupe.ClaimResult, []error, error) {
	done, doneErr := r.Complete(ctx, ts, retention)
	res, errs, err := r.Claim(ctx, items, lease)
	return done, doneErr, res, errs, err
}
