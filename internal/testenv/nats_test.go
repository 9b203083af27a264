package testenv_test

import (
	"bufio"
	"net"
	"strings"
	"testing"

	"github.com/idemq/idemq/internal/testenv"
)

// TestPrivateNATSKillAndStart kills the server with SIGKILL and starts it
// again: it is gone between, and greets with JetStream on the same
// address after.
func TestPrivateNATSKillAndStart(t *testing.T) {
	t.Parallel()
	n := testenv.StartPrivateNATS(t)
	addr := strings.TrimPrefix(n.URL(), "nats://")
	greet := func() (string, error) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return "", err
		}
		defer conn.Close()
		return bufio.NewReader(conn).ReadString('\n')
	}
	if info, err := greet(); err != nil || !strings.Contains(info, `"jetstream":true`) {
		t.Fatalf("greeting %q, %v; want one with JetStream", info, err)
	}
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := greet(); err == nil {
		t.Fatal("the killed server still greets")
	}
	if err := n.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if info, err := greet(); err != nil || !strings.Contains(info, `"jetstream":true`) {
		t.Fatalf("greeting after the restart %q, %v", info, err)
	}
}
