package grpcv5_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	golang "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"

	"github.com/idemq/idemq/grpcv5"
	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testenv/grpcread"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
)

// runName is unique per test run, for topics and groups.
func runName(what string) string {
	return fmt.Sprintf("grpcv5-%s-%d-%d", what, os.Getpid(), time.Now().UnixNano())
}

// startProducer starts a gRPC producer on the test proxy, for topic, with
// checker (may be nil), and returns its wrap and itself.
func startProducer(t *testing.T, topic string, checker *golang.TransactionChecker) (*grpcv5.Producer, golang.Producer) {
	t.Helper()
	opts := []golang.ProducerOption{golang.WithTopics(topic)}
	if checker != nil {
		opts = append(opts, golang.WithTransactionChecker(checker))
	}
	rp, err := golang.NewProducer(&golang.Config{
		Endpoint:    testenv.RocketMQ5(t).Proxy,
		Credentials: &credentials.SessionCredentials{},
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := rp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rp.GracefulStop() })
	p, err := grpcv5.NewProducer(rp, testkit.Keys(t, 9))
	if err != nil {
		t.Fatal(err)
	}
	return p, rp
}

// bodies counts views by body.
func bodies(views []*golang.MessageView) map[string]int {
	n := map[string]int{}
	for _, v := range views {
		n[string(v.GetBody())]++
	}
	return n
}

// countOf counts s in ss.
func countOf(ss []string, s string) int {
	n := 0
	for _, x := range ss {
		if x == s {
			n++
		}
	}
	return n
}

// viewKey is the key a received message carries.
func viewKey(v *golang.MessageView) string { return msgkey.Of(msgkey.Properties(v.GetProperties())) }

// checkKey fails t unless every copy of body in views carries key, in the
// property and among its Keys.
func checkKey(t *testing.T, views []*golang.MessageView, body, key string) {
	t.Helper()
	for _, v := range views {
		if string(v.GetBody()) != body {
			continue
		}
		if k := viewKey(v); k != key {
			t.Errorf("%s: received key %q, want %q", body, k, key)
		}
		if !slices.Contains(v.GetKeys(), key) {
			t.Errorf("%s: Keys %q lack %q", body, v.GetKeys(), key)
		}
	}
}

// TestThroughTheProxy sends through a real 5.x proxy, in a child process
// that tolerates the gRPC client's own data races (internal/racechild).
func TestThroughTheProxy(t *testing.T) {
	ep := testenv.RocketMQ5(t)
	if !racechild.Test(t, "IDEMQ_ROCKETMQ5_NAMESRV="+ep.NameServer, "IDEMQ_ROCKETMQ5_PROXY="+ep.Proxy) {
		return
	}
	t.Run("sends", testSends)
	t.Run("transactions", testTransactions)
}

// testSends sends Send and SendAsync twice each (every copy arrives with
// its message's one key), a message with a business key (kept), and one
// whose preset key cannot travel (refused, never arrives).
func testSends(t *testing.T) {
	topic := runName("send")
	got := grpcread.Topic(t, topic)
	p, _ := startProducer(t, topic, nil)
	ctx := t.Context()

	plain := &golang.Message{Topic: topic, Body: []byte("sync")}
	async := &golang.Message{Topic: topic, Body: []byte("async")}
	business := &golang.Message{Topic: topic, Body: []byte("business")}
	business.AddProperty(msgkey.Property, "order-42")
	invalid := &golang.Message{Topic: topic, Body: []byte("invalid")}
	invalid.AddProperty(msgkey.Property, "order 42")
	for range 2 {
		if _, err := p.Send(ctx, plain); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		if err := p.SendAsync(ctx, async, func(_ context.Context, _ []*golang.SendReceipt, err error) { done <- err }); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Send(ctx, invalid); !errors.Is(err, msgkey.ErrInvalid) {
		t.Fatalf("invalid preset key: %v, want msgkey.ErrInvalid", err)
	}
	// Sent after the invalid one: once it has arrived, the queue (one only)
	// was read past where the invalid one would be.
	if _, err := p.Send(ctx, business); err != nil {
		t.Fatal(err)
	}
	if key(plain) == "" || key(async) == "" || key(plain) == key(async) {
		t.Fatalf("keys %q and %q: want two distinct stamped keys", key(plain), key(async))
	}
	views := got.Await(t, "two copies of each and the business key", func(vs []*golang.MessageView) bool {
		n := bodies(vs)
		return n["sync"] >= 2 && n["async"] >= 2 && n["business"] >= 1
	})
	checkKey(t, views, "sync", key(plain))
	checkKey(t, views, "async", key(async))
	checkKey(t, views, "business", "order-42")
	if n := bodies(views)["invalid"]; n > 0 {
		t.Errorf("the message with an invalid key arrived %d times", n)
	}
}

// checker resolves check-backs by key and records the keys it was asked
// about.
type checker struct {
	mu     sync.Mutex
	asked  []string
	commit map[string]bool // key → commit (else roll back)
}

func (c *checker) check(v *golang.MessageView) golang.TransactionResolution {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := viewKey(v)
	c.asked = append(c.asked, k)
	if c.commit[k] {
		return golang.COMMIT
	}
	return golang.ROLLBACK
}

func (c *checker) askedAbout() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.asked)
}

// testTransactions sends transactional messages: a committed one arrives
// with its key, a rolled back one never does, and one left unresolved is
// resolved by the broker's check-back, whose checker sees the key stamped
// before the half message and commits: it arrives with that key.
//
// Not necessarily once: a 5.x broker records resolutions in batches
// (transactionOpBatchInterval) and checks back a half message older than
// transactionTimeOut at every transactionCheckInterval (1 s each on the
// test broker) until the record is written. With the batches at their
// default 3 s, the 5.5.0 broker checked the unresolved and the rolled back
// half message twice, a second apart, in every run, and the checker's two
// commits were delivered twice, each copy with the key: a duplicate for the
// consumer's dedupe. The test broker batches every 100 ms, which checked
// once and delivered once in three runs, but a slow record can still be
// checked again. Each delivery needs a commit, so there are no more
// deliveries than check-backs.
func testTransactions(t *testing.T) {
	topic := runName("tx")
	got := grpcread.Topic(t, topic)
	c := &checker{commit: map[string]bool{}}
	p, rp := startProducer(t, topic, &golang.TransactionChecker{Check: c.check})
	ctx := t.Context()

	sent := map[string]*golang.Message{}
	for _, body := range []string{"commit", "rollback", "unknown"} {
		m := &golang.Message{Topic: topic, Body: []byte(body)}
		// Stamped first so that the checker knows the key before the
		// broker can ask; SendWithTransaction keeps it.
		if err := p.Stamp(ctx, m); err != nil {
			t.Fatal(err)
		}
		stamped := key(m)
		if body == "unknown" {
			c.mu.Lock()
			c.commit[stamped] = true
			c.mu.Unlock()
		}
		tx := rp.BeginTransaction()
		if _, err := p.SendWithTransaction(ctx, m, tx); err != nil {
			t.Fatal(err)
		}
		if key(m) != stamped {
			t.Fatalf("%s: SendWithTransaction changed the key from %q to %q", body, stamped, key(m))
		}
		sent[body] = m
		switch body {
		case "commit":
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		case "rollback":
			if err := tx.RollBack(); err != nil {
				t.Fatal(err)
			}
		case "unknown":
			// Neither: the local transaction's outcome is unknown, so the
			// broker asks the checker, which commits this key.
		}
	}
	begin := time.Now() // the unresolved half message was just sent
	views := got.Await(t, "the committed and the checked-back messages", func(vs []*golang.MessageView) bool {
		n := bodies(vs)
		return n["commit"] > 0 && n["unknown"] > 0
	})
	t.Logf(racechild.Figure+"the check-back's commit arrived %v after the half message", time.Since(begin).Round(time.Millisecond))
	// A delivered rollback or a repeated check-back shows within a few
	// check intervals (1 s on the test broker).
	time.Sleep(4 * time.Second)
	views = got.Await(t, "", func([]*golang.MessageView) bool { return true })
	checkKey(t, views, "commit", key(sent["commit"]))
	checkKey(t, views, "unknown", key(sent["unknown"]))
	n := bodies(views)
	if n["commit"] != 1 || n["rollback"] > 0 {
		t.Errorf("received %v: want commit once, rollback never", n)
	}
	t.Logf(racechild.Figure+"the checked-back message arrived %d times", n["unknown"])
	asked := c.askedAbout()
	if checks := countOf(asked, key(sent["unknown"])); checks == 0 || n["unknown"] > checks {
		t.Errorf("%d deliveries after %d check-backs about the unresolved message's key %q (all: %q): want at least one, and a commit per delivery",
			n["unknown"], checks, key(sent["unknown"]), asked)
	}
	for _, k := range asked {
		if k != key(sent["unknown"]) && k != key(sent["rollback"]) && k != key(sent["commit"]) {
			t.Errorf("the checker was asked about key %q, which was never sent", k)
		}
	}
	t.Logf(racechild.Figure+"%d check-backs for 3 half messages", len(asked))
}
