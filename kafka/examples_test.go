package kafka_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemq/idemq/internal/testenv"
)

// TestExamplePrograms builds examples/sender and examples/receiver and runs
// them against the real servers: the sender produces 40 records and 10 of
// them again, and the receiver applies each of the 40 once and suppresses
// the 10 copies.
func TestExamplePrograms(t *testing.T) {
	t.Parallel()
	brokers, redisAddr := testenv.Kafka(t), testenv.Redis(t)
	dir := t.TempDir()
	for _, name := range []string{"sender", "receiver"} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, name), "./examples/"+name).CombinedOutput()
		if err != nil {
			t.Fatalf("build %s: %v\n%s", name, err, out)
		}
	}
	topic := unique("example")
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), filepath.Join(dir, name), args...)
		cmd.Env = append(os.Environ(), "IDEMQ_KAFKA_BROKERS="+brokers, "IDEMQ_REDIS_ADDR="+redisAddr)
		cmd.Stderr = testWriter{t}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return strings.TrimSpace(string(out))
	}
	if got := run("sender", "-node", "7", "-topic", topic, "-n", "40", "-resend", "10"); got != "sent=40 resent=10" {
		t.Fatalf("sender said %q", got)
	}
	got := run("receiver", "-group", unique("example-group"), "-topic", topic, "-expect", "40", "-idle", "2s")
	if got != "delivered=50 suppressed=10 applied=40" {
		t.Errorf("receiver said %q, want delivered=50 suppressed=10 applied=40", got)
	}
}

// TestExampleProgramsNeedSettings: each program refuses to start without
// its addresses, naming the setting.
func TestExampleProgramsNeedSettings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"sender", nil, "no brokers: set -brokers or IDEMQ_KAFKA_BROKERS"},
		{"sender", []string{"-brokers", "127.0.0.1:1"}, "no node id: set -node or IDEMQ_NODE"},
		{"receiver", []string{"-brokers", "127.0.0.1:1"}, "set -brokers and -redis"},
		{"receiver", []string{"-brokers", "127.0.0.1:1", "-redis", "127.0.0.1:1"}, "no consumer group: set -group"},
	} {
		t.Run(tc.name+"/"+strings.Join(tc.args, " "), func(t *testing.T) {
			cmd := exec.Command("go", append([]string{"run", "./examples/" + tc.name}, tc.args...)...)
			cmd.Env = append(os.Environ(), "IDEMQ_KAFKA_BROKERS=", "IDEMQ_REDIS_ADDR=", "IDEMQ_NODE=")
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), tc.want) {
				t.Errorf("err %v, said %q; want a failure saying %q", err, out, tc.want)
			}
		})
	}
}

// testWriter writes to t's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
