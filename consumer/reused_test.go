package consumer_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/internal/adapter"
	"github.com/idemq/idemq/internal/testenv"
)

// withBody returns a message with key and body.
func withBody(key, body string) consumer.Message {
	m := msg(key)
	m.Body = []byte(body)
	return m
}

// TestReusedKey delivers a key again with the same body or another one, on
// memdedupe and on a real Redis: a reused key is retried and reported
// unless the check is turned off, a redelivery is suppressed, and so is a
// delivery of a key that an earlier version recorded with its SHA-256
// fingerprint, which the store does not compare with the shorter one of
// today.
func TestReusedKey(t *testing.T) {
	stores := []struct {
		name string
		new  func(t *testing.T) dedupe.Store
	}{
		{"memdedupe", func(*testing.T) dedupe.Store { return memdedupe.New(memdedupe.Config{}) }},
		{"redisdedupe", func(t *testing.T) dedupe.Store {
			rdb := redis.NewClient(&redis.Options{Addr: testenv.Redis(t)})
			t.Cleanup(func() { rdb.Close() })
			store, err := redisdedupe.New(rdb, redisdedupe.Config{Prefix: fmt.Sprintf("reused:%d-%d:", os.Getpid(), time.Now().UnixNano())})
			if err != nil {
				t.Fatal(err)
			}
			return store
		}},
	}
	tests := []struct {
		name string
		opts []consumer.Option
		// earlier is the body an earlier version recorded k done for; ""
		// for none.
		earlier string
		// deliveries are delivered in turn, each as one batch.
		deliveries [][]consumer.Message
		// wantConflict: the last delivery is retried as reused; else it is
		// acknowledged.
		wantConflict bool
		wantApplied  int
		wantSuppr    int64
	}{
		{name: "OtherBody", deliveries: [][]consumer.Message{{withBody("k", "A")}, {withBody("k", "B")}},
			wantConflict: true, wantApplied: 1},
		{name: "OtherBodyInOneBatch", deliveries: [][]consumer.Message{{withBody("k", "A"), withBody("k", "B")}},
			wantConflict: true, wantApplied: 1},
		{name: "SameBody", deliveries: [][]consumer.Message{{withBody("k", "A")}, {withBody("k", "A")}},
			wantApplied: 1, wantSuppr: 1},
		{name: "OtherBodyWithoutFingerprint", opts: []consumer.Option{consumer.WithoutFingerprint()},
			deliveries:  [][]consumer.Message{{withBody("k", "A")}, {withBody("k", "B")}},
			wantApplied: 1, wantSuppr: 1},
		{name: "EarlierVersionSameBody", earlier: "A", deliveries: [][]consumer.Message{{withBody("k", "A")}},
			wantApplied: 0, wantSuppr: 1},
		// Fingerprints of another kind are not compared: the price of an
		// upgrade that reports no redelivery across it as a reused key.
		{name: "EarlierVersionOtherBody", earlier: "A", deliveries: [][]consumer.Message{{withBody("k", "B")}},
			wantApplied: 0, wantSuppr: 1},
	}
	for _, st := range stores {
		for _, tt := range tests {
			t.Run(st.name+"/"+tt.name, func(t *testing.T) {
				store := st.new(t)
				if tt.earlier != "" {
					sum := sha256.Sum256([]byte(tt.earlier))
					recordDone(t, store, "k", hex.EncodeToString(sum[:]))
				}
				c, logs := logged(t, store, tt.opts...)
				l := new(ledger)
				var vs []adapter.Verdict
				for _, d := range tt.deliveries {
					vs = process(c, l.handle, d...)
				}
				last := vs[len(vs)-1]
				if tt.wantConflict {
					recs := records(logs)
					if last.Action != adapter.Retry || last.Outcome != dedupe.Reused || len(recs) != 1 || recs[0].attrs["key"] != "k" {
						t.Errorf("verdict %+v, logged %+v; want a retry as reused, logged with its key", last, recs)
					}
				} else if !acked(vs) {
					t.Errorf("verdicts %+v; want Ack", vs)
				}
				stats := c.Stats()
				var wantConflicts int64
				if tt.wantConflict {
					wantConflicts = 1
				}
				if got := stats.Reused; got != wantConflicts {
					t.Errorf("Reused = %d, want %d", got, wantConflicts)
				}
				if got := stats.Suppressed; got != tt.wantSuppr {
					t.Errorf("Suppressed = %d, want %d", got, tt.wantSuppr)
				}
				if l.count("k") != tt.wantApplied {
					t.Errorf("applied %d times, want %d", l.count("k"), tt.wantApplied)
				}
			})
		}
	}
}
