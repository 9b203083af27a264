package examples_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Run(m)) }

// TestSenderReceiver builds the example programs and runs them against
// the real servers: the receiver applies each of the sender's messages
// once, and the stream drops every copy the sender publishes again.
func TestSenderReceiver(t *testing.T) {
	t.Parallel()
	url, redisAddr := testenv.NATS(t), testenv.Redis(t)
	bin := t.TempDir()
	for _, prog := range []string{"sender", "receiver"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, prog), "./"+prog).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", prog, err, out)
		}
	}
	run := fmt.Sprintf("%d", time.Now().UnixNano())
	stream, subject, durable := "EXAMPLES_"+run, "idemq.examples."+run, "examples-"+run
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var recvOut bytes.Buffer
	recv := exec.CommandContext(ctx, filepath.Join(bin, "receiver"), "-nats", url, "-redis", redisAddr,
		"-stream", stream, "-subject", subject, "-durable", durable, "-expect", "200", "-idle", "1s")
	recv.Stdout, recv.Stderr = &recvOut, &recvOut
	if err := recv.Start(); err != nil {
		t.Fatal(err)
	}
	send, err := exec.CommandContext(ctx, filepath.Join(bin, "sender"), "-nats", url, "-node", "11",
		"-stream", stream, "-subject", subject, "-n", "200", "-resend", "50").CombinedOutput()
	if err != nil {
		t.Fatalf("sender: %v\n%s", err, send)
	}
	if got := strings.TrimSpace(string(send)); got != "sent=200 resent=50 dropped=50" {
		t.Errorf("sender printed %q, want sent=200 resent=50 dropped=50", got)
	}
	if err := recv.Wait(); err != nil {
		t.Fatalf("receiver: %v\n%s", err, recvOut.String())
	}
	if got := strings.TrimSpace(recvOut.String()); got != "delivered=200 suppressed=0 applied=200" {
		t.Errorf("receiver printed %q, want delivered=200 suppressed=0 applied=200", got)
	}
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	ledger, err := rdb.HGetAll(t.Context(), durable+":ledger").Result()
	if err != nil {
		t.Fatal(err)
	}
	doubled := 0
	for _, n := range ledger {
		if n != "1" {
			doubled++
		}
	}
	if len(ledger) != 200 || doubled != 0 {
		t.Errorf("ledger holds %d keys, %d applied more than once; want 200, none", len(ledger), doubled)
	}
}

// TestNoAddress runs each program without a server address: it fails at
// start, naming the setting.
func TestNoAddress(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ prog, want string }{
		{"sender", "set -nats or IDEMQ_NATS_URL"},
		{"receiver", "set -nats and -redis"},
	} {
		t.Run(tc.prog, func(t *testing.T) {
			cmd := exec.Command("go", "run", "./"+tc.prog)
			cmd.Env = append(os.Environ(), "IDEMQ_NATS_URL=", "IDEMQ_REDIS_ADDR=")
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), tc.want) {
				t.Errorf("%s without an address: %v, %q; want a failure naming %q", tc.prog, err, out, tc.want)
			}
		})
	}
}
