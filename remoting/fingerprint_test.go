package remoting_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/remoting"
)

// withBody returns a message with key and body.
func withBody(key, body string) *primitive.MessageExt {
	m := msg(key)
	m.Body = []byte(body)
	return m
}

// recordEarlier records key done for body as earlier versions did, with
// the hex SHA-256 of body as its fingerprint.
func recordEarlier(t *testing.T, store dedupe.Store, key, body string) {
	t.Helper()
	ref := dedupe.Ref{Group: testGroup, Key: key}
	sum := sha256.Sum256([]byte(body))
	res, err := testkit.Claim(t.Context(), store, dedupe.Item{Ref: ref, Fingerprint: hex.EncodeToString(sum[:])}, time.Hour)
	if err != nil || res.Outcome != dedupe.Acquired {
		t.Fatalf("claim = %v, %v", res.Outcome, err)
	}
	if err := testkit.Complete(t.Context(), store, dedupe.Ticket{Ref: ref, Token: res.Token}, time.Hour); err != nil {
		t.Fatal(err)
	}
}

// TestReusedKey delivers a key again with the same body or another one,
// through both callbacks on memdedupe and on a real Redis: a reused key is
// retried and reported unless the check is turned off, a redelivery is
// suppressed, and so is a delivery of a key that an earlier version
// recorded with its SHA-256 fingerprint, which the store does not compare
// with the shorter one of today.
func TestReusedKey(t *testing.T) {
	stores := []struct {
		name string
		new  func(t *testing.T) dedupe.Store
	}{
		{"memdedupe", func(*testing.T) dedupe.Store { return memdedupe.New(memdedupe.Config{}) }},
		{"redisdedupe", func(t *testing.T) dedupe.Store {
			store, _ := newRedisStore(t, fmt.Sprintf("reused:%d-%d:", os.Getpid(), time.Now().UnixNano()))
			return store
		}},
	}
	paths := []struct {
		name     string
		callback func(*consumer.Consumer, consumer.Handler) remoting.Callback
		retry    rmq.ConsumeResult // the answer for a reused key
	}{
		{"Concurrently", remoting.Concurrently, rmq.ConsumeRetryLater},
		{"Orderly", orderly, rmq.SuspendCurrentQueueAMoment},
	}
	tests := []struct {
		name string
		opts []consumer.Option
		// earlier is the body an earlier version recorded k done for; ""
		// for none.
		earlier string
		// deliveries are delivered in turn, each as one batch.
		deliveries [][]*primitive.MessageExt
		// wantConflict: the last delivery is retried as reused; else it is
		// acknowledged.
		wantConflict bool
		wantApplied  int
		wantSuppr    int64
	}{
		{name: "OtherBody", deliveries: [][]*primitive.MessageExt{{withBody("k", "A")}, {withBody("k", "B")}},
			wantConflict: true, wantApplied: 1},
		{name: "OtherBodyInOneBatch", deliveries: [][]*primitive.MessageExt{{withBody("k", "A"), withBody("k", "B")}},
			wantConflict: true, wantApplied: 1},
		{name: "SameBody", deliveries: [][]*primitive.MessageExt{{withBody("k", "A")}, {withBody("k", "A")}},
			wantApplied: 1, wantSuppr: 1},
		{name: "OtherBodyWithoutFingerprint", opts: []consumer.Option{consumer.WithoutFingerprint()},
			deliveries:  [][]*primitive.MessageExt{{withBody("k", "A")}, {withBody("k", "B")}},
			wantApplied: 1, wantSuppr: 1},
		{name: "EarlierVersionSameBody", earlier: "A", deliveries: [][]*primitive.MessageExt{{withBody("k", "A")}},
			wantApplied: 0, wantSuppr: 1},
		// Fingerprints of another kind are not compared: the price of an
		// upgrade that reports no redelivery across it as a reused key.
		{name: "EarlierVersionOtherBody", earlier: "A", deliveries: [][]*primitive.MessageExt{{withBody("k", "B")}},
			wantApplied: 0, wantSuppr: 1},
	}
	for _, st := range stores {
		for _, p := range paths {
			for _, tt := range tests {
				t.Run(st.name+"/"+p.name+"/"+tt.name, func(t *testing.T) {
					store := st.new(t)
					if tt.earlier != "" {
						recordEarlier(t, store, "k", tt.earlier)
					}
					cc, logs := newConsumer(t, store, tt.opts...)
					c, stats := newCounter(), cc.Stats()
					cb := p.callback(cc, c.handle)
					var (
						res rmq.ConsumeResult
						err error
					)
					for _, d := range tt.deliveries {
						res, err = cb(context.Background(), d...)
					}
					if tt.wantConflict {
						if res != p.retry || err == nil || !strings.Contains(err.Error(), "reused") {
							t.Errorf("got %v, %v; want %v, reused", res, err, p.retry)
						}
						for _, want := range []string{"level=ERROR", "key reused", "group=group-a", "key=k", "WithoutFingerprint"} {
							if !strings.Contains(logs.String(), want) {
								t.Errorf("log %q does not say %q", logs, want)
							}
						}
					} else if res != rmq.ConsumeSuccess || err != nil {
						t.Errorf("got %v, %v; want success", res, err)
					}
					var wantConflicts int64
					if tt.wantConflict {
						wantConflicts = 1
					}
					if got := stats.Reused.Load(); got != wantConflicts {
						t.Errorf("Reused = %d, want %d", got, wantConflicts)
					}
					if got := stats.Suppressed.Load(); got != tt.wantSuppr {
						t.Errorf("Suppressed = %d, want %d", got, tt.wantSuppr)
					}
					if c.count("k") != tt.wantApplied {
						t.Errorf("applied %d times, want %d", c.count("k"), tt.wantApplied)
					}
				})
			}
		}
	}
}

// TestTxReusedKey checks that Consumer.Tx neither runs nor commits a reused
// key's other body, unless the check is turned off.
func TestTxReusedKey(t *testing.T) {
	for _, d := range txBackends {
		for _, tt := range []struct {
			name         string
			opts         []consumer.Option
			wantConflict bool
		}{
			{"Default", nil, true},
			{"WithoutFingerprint", []consumer.Option{consumer.WithoutFingerprint()}, false},
		} {
			t.Run(d.Name+"/"+tt.name, func(t *testing.T) {
				e := newTxEnv(t, d)
				cb, stats := e.consumer(e.store, e.applier("A"), tt.opts...)
				if res, err := cb(context.Background(), withBody("k", "A")); res != rmq.ConsumeSuccess {
					t.Fatalf("first delivery: %v, %v", res, err)
				}
				res, err := cb(context.Background(), withBody("k", "B"))
				if tt.wantConflict != (stats.Reused.Load() == 1) || tt.wantConflict != (res == rmq.ConsumeRetryLater) {
					t.Errorf("other body: %v, %v, reused %d; want reused: %v", res, err, stats.Reused.Load(), tt.wantConflict)
				}
				if got := e.applied("k"); len(got) != 1 {
					t.Errorf("applied by %v, want once", got)
				}
				if n := stats.Reused.Load() + stats.Suppressed.Load(); n != 1 {
					t.Errorf("Reused %d + Suppressed %d, want 1 in all", stats.Reused.Load(), stats.Suppressed.Load())
				}
				e.idle()
			})
		}
	}
}
