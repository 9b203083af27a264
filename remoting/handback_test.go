package remoting_test

import (
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/remoting"
)

// TestHandBackAllocatesAsItsStrategy: through joins and leaves, HandBack
// gives each rebalance the queues its strategy gives, even when its lock
// and unlock reach no broker (here no name server listens); it logs those
// at warn. That they hand queues over is TestOrderlyGroupChange's.
func TestHandBackAllocatesAsItsStrategy(t *testing.T) {
	logs := new(testkit.Buffer)
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(logs, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	strategy := remoting.HandBack(primitive.NewPassthroughResolver([]string{closed}), rmq.AllocateByAveragely)

	mqs := make([]*primitive.MessageQueue, 8)
	for i := range mqs {
		mqs[i] = &primitive.MessageQueue{Topic: "orders", BrokerName: "broker-a", QueueId: i}
	}
	for _, cids := range [][]string{{"a"}, {"a", "b"}, {"a", "b", "c"}, {"a", "c"}, {"a"}} {
		for _, me := range cids {
			got := strategy(testGroup, me, mqs, cids)
			if want := rmq.AllocateByAveragely(testGroup, me, mqs, cids); !slices.Equal(got, want) {
				t.Errorf("group %v, %s: HandBack gives %v, its strategy %v", cids, me, got, want)
			}
		}
	}
	for _, want := range []string{"could not unlock", "could not lock", "connection refused"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
}
