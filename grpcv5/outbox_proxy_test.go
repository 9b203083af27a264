package grpcv5_test

import (
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	golang "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"

	"github.com/idemq/idemq/grpcv5"
	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testenv/grpcread"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/outbox"
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
	got := grpcread.Topic(t, topic)

	rp, err := golang.NewProducer(&golang.Config{Endpoint: ep.Proxy, Credentials: &credentials.SessionCredentials{}}, golang.WithTopics(topic))
	if err != nil {
		t.Fatal(err)
	}
	if err := rp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rp.GracefulStop() })
	keys := testkit.Keys(t, 3)
	s, err := grpcv5.NewOutboxSender(rp)
	if err != nil {
		t.Fatal(err)
	}

	b := testdb.MySQL
	db := b.Open(t)
	o, err := outbox.New(db, b.Dialect, keys, outbox.Config{MaxBody: 8 << 20})
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
	added := testkit.AddCommitted(t, db, o, msgs...)
	r, err := outbox.NewRelay(o, s, outbox.RelayConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })

	views := got.Await(t, "every row but the poison", func(vs []*golang.MessageView) bool { return len(vs) >= n-1 })
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
	var st outbox.Counts
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if st, err = o.Count(t.Context()); err != nil {
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
