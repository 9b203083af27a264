package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
)

// TestRelay runs 'idemq relay' over a SQLite outbox into the real 4.x
// broker through its name server, and into the 5.x broker through its
// proxy with the gRPC client: it ships the rows (the broker answered
// SEND_OK for each: they are marked sent) and exits 0 on SIGTERM, saying
// what it shipped. The gRPC client starts only once it knows a topic's
// route, which --topic names: without it, the relay did not start.
func TestRelay(t *testing.T) {
	for _, tc := range []struct {
		name string
		args func(t *testing.T) []string
	}{
		{"namesrv", func(t *testing.T) []string { return []string{"--namesrv", testenv.RocketMQ(t)} }},
		{"proxy", func(t *testing.T) []string {
			testenv.RocketMQ5Topic(t, "orders", 4)
			return []string{"--proxy", testenv.RocketMQ5(t).Proxy, "--topic", "orders"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			broker := tc.args(t)
			store := sqliteBackend.url(t)
			if r := idemq(t, nil, "migrate", "--store", store, "--outbox"); r.code != 0 {
				t.Fatalf("migrate: %v", r)
			}
			addOutboxRows(t, store, 3)

			r, _ := startDaemon(t, "relaying idemq_outbox at ", append([]string{"relay", "--store", store}, broker...)...)
			o, _ := openOutbox(t, store)
			testkit.WaitFor(t, "the rows sent", func() bool {
				st, err := o.Count(context.Background())
				return err == nil && st.Sent == 3
			})
			if later := r.stop(); len(later) == 0 || later[len(later)-1] != "stopped: shipped 3, retried 0, parked 0, lease lost 0" {
				t.Errorf("lines after the first %q", later)
			}
		})
	}
}

// TestRelayNotify runs 'idemq relay --notify' over a PostgreSQL outbox that
// 'idemq migrate --outbox --notify' made, polling once an hour: rows added
// after it shipped the first ones, and so waits for its next poll, ship
// too, so it was woken by their commit.
func TestRelayNotify(t *testing.T) {
	ns := testenv.RocketMQ(t)
	store := postgresBackend.url(t)
	if r := idemq(t, nil, "migrate", "--store", store, "--outbox", "--notify"); r.code != 0 {
		t.Fatalf("migrate: %v", r)
	}
	r, _ := startDaemon(t, "relaying idemq_outbox at ", "relay", "--store", store, "--namesrv", ns, "--notify", "--poll-interval", "1h")
	addOutboxRows(t, store, 3)
	o, _ := openOutbox(t, store)
	for _, sent := range []int64{3, 6} {
		if sent > 3 {
			addOutboxRows(t, store, 3)
		}
		testkit.WaitFor(t, fmt.Sprint(sent, " rows sent"), func() bool {
			st, err := o.Count(context.Background())
			return err == nil && st.Sent == sent
		})
	}
	r.stop()
}

// TestRelayProxyUnreachable starts 'idemq relay --proxy' towards a port
// nothing listens on: the gRPC client's start would wait for the proxy for
// good, so the relay gives up at --timeout, exits 1 and says so.
func TestRelayProxyUnreachable(t *testing.T) {
	store := sqliteBackend.url(t)
	if r := idemq(t, nil, "migrate", "--store", store, "--outbox"); r.code != 0 {
		t.Fatalf("migrate: %v", r)
	}
	proxy := "127.0.0.1:" + closedPort(t)
	r := idemq(t, nil, "relay", "--store", store, "--proxy", proxy, "--topic", "orders", "--timeout", "2s")
	wantFail(t, r, exitFailure, "start the client for proxy "+proxy, "no answer from the proxy within --timeout")
}
