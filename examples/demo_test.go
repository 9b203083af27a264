// Package examples_test runs the demo the README promises, against real
// servers, so that make demo cannot rot unnoticed.
package examples_test

import (
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/idemq/idemq/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Run(m)) }

var summaryRE = regexp.MustCompile(`^summary: sent=(\d+) resent=(\d+) delivered=(\d+) suppressed=(\d+) applied=(\d+)$`)

func TestDemoAppliesEachMessageOnce(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), "bash", "demo.sh", "40", "10")
	cmd.Env = append(os.Environ(),
		"IDEMQ_ROCKETMQ_NAMESRV="+testenv.RocketMQ(t),
		"IDEMQ_REDIS_ADDR="+testenv.Redis(t))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	last := lines[len(lines)-1]
	m := summaryRE.FindStringSubmatch(last)
	if m == nil {
		t.Fatalf("last line %q is not the summary\n%s", last, out)
	}
	n := make([]int, len(m))
	for i := 1; i < len(m); i++ {
		n[i], _ = strconv.Atoi(m[i])
	}
	// A duplicate the broker adds on its own is suppressed too, so
	// suppressed may exceed resent; applied may not differ from sent.
	if sent, resent, suppressed, applied := n[1], n[2], n[4], n[5]; sent != 40 || resent != 10 || applied != sent || suppressed < resent {
		t.Fatalf("want sent=40 resent=10 suppressed>=10 applied=40, got %q", last)
	}
	t.Log(last)
}

// The example commands refuse to start, saying why, rather than run
// wrongly: a sender given neither a pool to lease its node id from nor a
// node id (two senders on the same default node would stamp different
// messages with the same key), stray arguments (rather than ignore them),
// and unreachable servers, named with the flag to fix.
func TestCommandsRefuseToStart(t *testing.T) {
	up := listening(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"SenderNeedsANodeID", []string{"./sender", "-namesrv", up, "-n", "1", "-resend", "0"}, "no node id: set -redis"},
		{"SenderStrayArgument", []string{"./sender", "-namesrv", "127.0.0.1:1", "orders"}, `unexpected arguments ["orders"]`},
		{"ReceiverStrayArgument", []string{"./receiver", "-namesrv", "127.0.0.1:1", "orders"}, `unexpected arguments ["orders"]`},
		{"SenderNameServer", []string{"./sender", "-namesrv", "127.0.0.1:1", "-node", "1"}, "name server 127.0.0.1:1 (-namesrv)"},
		{"ReceiverNameServer", []string{"./receiver", "-namesrv", "127.0.0.1:1", "-redis", up}, "name server 127.0.0.1:1 (-namesrv)"},
		{"ReceiverRedis", []string{"./receiver", "-namesrv", up, "-redis", "127.0.0.1:1"}, "redis at 127.0.0.1:1 (-redis)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), "go", append([]string{"run"}, tt.args...)...)
			cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
				return strings.HasPrefix(kv, "IDEMQ_REDIS_ADDR=") || strings.HasPrefix(kv, "IDEMQ_NODE=")
			})
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), tt.want) {
				t.Fatalf("%v: err %v, output lacks %q:\n%s", tt.args, err, tt.want, out)
			}
		})
	}
}

// listening returns the address of a port that accepts connections (and
// answers nothing) until t ends.
func listening(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().String()
}
