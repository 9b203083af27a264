package testenv_test

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/idemq/idemq/internal/testenv"
)

func TestStartRocketMQ5(t *testing.T) {
	rlog.SetLogLevel("error")
	ctx := t.Context()
	begin := time.Now()
	srv, err := testenv.StartRocketMQ5(ctx, t.TempDir(), t.Output())
	if errors.Is(err, exec.ErrNotFound) {
		testenv.Missing(t, err.Error()) // a failure under CI=true
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	})
	t.Logf("RocketMQ %s started in %v: name server %s, broker %s, proxy %s",
		srv.Version(), time.Since(begin).Round(time.Millisecond), srv.NameServer(), srv.BrokerAddr(), srv.Proxy())
	if !strings.HasPrefix(srv.Version(), "5.") {
		t.Errorf("jar version %q, want 5.x", srv.Version())
	}
	v, err := testenv.RocketMQBrokerVersion(ctx, srv.NameServer())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v, "V5_") {
		t.Errorf("broker version %q, want V5_*", v)
	}
	t.Logf("broker version %s", v)

	group := fmt.Sprintf("group-%s-%d", t.Name(), time.Now().UnixNano())
	if err := testenv.CreateRocketMQGroup(ctx, srv.NameServer(), group, 2); err != nil {
		t.Fatal(err)
	}
	if err := testenv.CreateRocketMQGroup(ctx, srv.NameServer(), group, -1); err == nil {
		t.Error("CreateRocketMQGroup accepted retryMaxTimes -1")
	}

	rocketmqRoundTrip(t, srv.NameServer(), srv.CreateTopic)
}

// TestRocketMQ5 checks the shared 5.x server: what withservers exports, or
// what testenv starts.
func TestRocketMQ5(t *testing.T) {
	ep := testenv.RocketMQ5(t)
	v, err := testenv.RocketMQBrokerVersion(t.Context(), ep.NameServer)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v, "V5_") {
		t.Fatalf("broker version %q at %s, want V5_*", v, ep.NameServer)
	}
	conn, err := net.DialTimeout("tcp", ep.Proxy, 5*time.Second)
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	conn.Close()
	testenv.RocketMQ5Topic(t, fmt.Sprintf("topic-%s-%d", t.Name(), time.Now().UnixNano()), 2)
	testenv.RocketMQGroup(t, ep.NameServer, fmt.Sprintf("group-%s-%d", t.Name(), time.Now().UnixNano()), 3)
	t.Logf("RocketMQ %s: name server %s, proxy %s", v, ep.NameServer, ep.Proxy)
}
