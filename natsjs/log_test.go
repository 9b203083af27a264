package natsjs_test

import (
	"log/slog"
	"slices"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/natsjs"
)

// TestRouteLogs kills and restarts the server under a connection: its
// disconnection and reconnection go to the logger.
func TestRouteLogs(t *testing.T) {
	t.Parallel()
	srv := testenv.StartPrivateNATS(t)
	logs := new(testkit.Logs)
	nc, err := nats.Connect(srv.URL(), natsjs.RouteLogs(slog.New(logs)), nats.MaxReconnects(-1), nats.ReconnectWait(50e6))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the disconnection logged", func() bool { return slices.Contains(logs.Messages(), "nats: disconnected") })
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the reconnection logged", func() bool { return slices.Contains(logs.Messages(), "nats: reconnected") })
	for _, r := range logs.Records() {
		if r.Message == "nats: disconnected" && r.Level != slog.LevelWarn {
			t.Errorf("disconnection logged at %v, want WARN", r.Level)
		}
	}
}
