package grpcv5_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	golang "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/outbox"
	ogrpc "github.com/idemq/idemq/outbox/grpcv5"
	pgrpcv5 "github.com/idemq/idemq/producer/grpcv5"
)

// TestRelayThroughTheProxy ships rows from a MariaDB table through a real
// 5.x proxy (in a child process that tolerates the gRPC client's own data
// races): every row arrives with the key Add returned, and a body over the
// proxy's limit is parked with its reason while the others flow.
func TestRelayThroughTheProxy(t *testing.T) {
	ep := testenv.RocketMQ5(t)
	if !racechild.Test(t, "IDEMQ_ROCKETMQ5_NAMESRV="+ep.NameServer, "IDEMQ_ROCKETMQ5_PROXY="+ep.Proxy, "IDEMQ_MYSQL_DSN="+testenv.MySQL(t)) {
		return
	}
	topic := fmt.Sprintf("outbox-grpc-%d-%d", os.Getpid(), time.Now().UnixNano())
	got := receiveTopic(t, topic)

	rp, err := golang.NewProducer(&golang.Config{Endpoint: ep.Proxy, Credentials: &credentials.SessionCredentials{}}, golang.WithTopics(topic))
	if err != nil {
		t.Fatal(err)
	}
	if err := rp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rp.GracefulStop() })
	gen, err := idgen.New(3, idgen.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := pgrpcv5.New(rp, msgkey.FromIDs(gen))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ogrpc.New(p)
	if err != nil {
		t.Fatal(err)
	}

	b := testdb.MySQL
	db := b.Open(t)
	o, err := outbox.New(db, b.Dialect, msgkey.FromIDs(gen), outbox.Config{MaxBody: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	const n = 20
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		msgs[i] = outbox.Message{Topic: topic, Tags: "created", Body: fmt.Appendf(nil, "row %d", i)}
	}
	poison := make([]byte, 4<<20+1)
	rand.Read(poison)
	msgs[3].Body = poison
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	added, err := o.AddBatch(t.Context(), tx, msgs)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	r, err := outbox.NewRelay(o, s, outbox.RelayConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })

	views := got.await(t, "every row but the poison", func(vs []*golang.MessageView) bool { return len(vs) >= n-1 })
	byKey := map[string]*golang.MessageView{}
	for _, v := range views {
		byKey[msgkey.Of(msgkey.Properties(v.GetProperties()))] = v
	}
	for i, k := range added {
		v, ok := byKey[k]
		if i == 3 {
			if ok {
				t.Error("the poison row arrived")
			}
			continue
		}
		if !ok || string(v.GetBody()) != string(msgs[i].Body) || !slices.Contains(v.GetKeys(), k) {
			t.Fatalf("row %d (key %s) arrived as %v", i, k, v)
		}
	}
	var st outbox.Stats
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if st, err = o.Stats(t.Context()); err != nil {
			t.Fatal(err)
		}
		if st.Pending == 0 || time.Now().After(deadline) {
			break
		}
	}
	if st.Parked != 1 || st.Sent != n-1 {
		t.Fatalf("stats %+v: want 1 parked, %d sent", st, n-1)
	}
	var reason string
	if err := db.QueryRowContext(t.Context(), "SELECT last_error FROM idemq_outbox WHERE state = 2").Scan(&reason); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(reason, "exceeds") && !strings.Contains(reason, "41301") {
		t.Errorf("parked with reason %q", reason)
	}
}

// received holds what a SimpleConsumer of a test topic was given.
type received struct {
	mu    sync.Mutex
	views []*golang.MessageView
}

// receiveTopic creates topic (one queue) and a group for it on the test
// proxy's broker, and receives and acks the topic's messages with a
// SimpleConsumer until t ends.
func receiveTopic(t *testing.T, topic string) *received {
	t.Helper()
	ep := testenv.RocketMQ5(t)
	testenv.RocketMQ5Topic(t, topic, 1)
	group := topic + "-reader"
	testenv.RocketMQGroup(t, ep.NameServer, group, 0)
	// The proxy refuses a receive whose await is under 3 s.
	sc, err := golang.NewSimpleConsumer(&golang.Config{
		Endpoint:      ep.Proxy,
		ConsumerGroup: group,
		Credentials:   &credentials.SessionCredentials{},
	},
		golang.WithSimpleAwaitDuration(5*time.Second),
		golang.WithSimpleSubscriptionExpressions(map[string]*golang.FilterExpression{topic: golang.SUB_ALL}),
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Start(); err != nil {
		t.Fatal(err)
	}
	r := new(received)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			views, err := sc.Receive(ctx, 16, 20*time.Second)
			if err != nil {
				var st *golang.ErrRpcStatus
				if !errors.As(err, &st) && ctx.Err() == nil {
					time.Sleep(100 * time.Millisecond) // not "no new message": do not spin
				}
				continue
			}
			for _, v := range views {
				if err := sc.Ack(ctx, v); err != nil && ctx.Err() == nil {
					t.Errorf("ack %s: %v", v.GetMessageId(), err)
				}
			}
			r.mu.Lock()
			r.views = append(r.views, views...)
			r.mu.Unlock()
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		sc.GracefulStop()
	})
	return r
}

// await returns what was received once done says it is all, failing t with
// what if that takes over 30 s.
func (r *received) await(t *testing.T, what string, done func([]*golang.MessageView) bool) []*golang.MessageView {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r.mu.Lock()
		views := slices.Clone(r.views)
		r.mu.Unlock()
		if done(views) {
			return views
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: received %d messages", what, len(views))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
