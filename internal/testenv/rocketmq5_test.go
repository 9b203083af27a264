package testenv_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testenv"
)

// TestRocketMQ5 checks the shared 5.x server (the one withservers or
// testenv started with StartRocketMQ5, or the one IDEMQ_ROCKETMQ5_* name):
// a 5.x broker, a proxy that accepts connections, topic and group creation
// over remoting, and a round trip of rocketmq-client-go through its name
// server. It starts no server of its own: make test already runs two
// RocketMQs, and this machine has two cores.
func TestRocketMQ5(t *testing.T) {
	// The round trip starts and shuts down a remoting client, which races
	// inside itself (see racechild): run where only our races fail it.
	if !racechild.Test(t) {
		return
	}
	rlog.SetLogLevel("error")
	ep := testenv.RocketMQ5(t)
	ctx := t.Context()
	v, err := testenv.RocketMQBrokerVersion(ctx, ep.NameServer)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v, "V5_") {
		t.Fatalf("broker version %q at %s, want V5_*", v, ep.NameServer)
	}
	t.Logf(racechild.Figure+"RocketMQ %s: name server %s, proxy %s", v, ep.NameServer, ep.Proxy)
	conn, err := net.DialTimeout("tcp", ep.Proxy, 5*time.Second)
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	conn.Close()

	id := fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())
	testenv.RocketMQ5Topic(t, "topic-"+id, 2)
	testenv.RocketMQGroup(t, ep.NameServer, "group-"+id, 2)
	if err := testenv.CreateRocketMQGroup(ctx, ep.NameServer, "group-"+id, -1); err == nil {
		t.Error("CreateRocketMQGroup accepted retryMaxTimes -1")
	}
	rocketmqRoundTrip(t, ep.NameServer, func(ctx context.Context, topic string, queues int) error {
		return testenv.CreateRocketMQTopic(ctx, ep.NameServer, topic, queues)
	})
}
