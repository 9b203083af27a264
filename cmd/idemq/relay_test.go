package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
)

// TestRelay runs 'idemq relay' over a SQLite outbox into the real 4.x
// broker: it ships the rows (the broker answered SEND_OK for each: they are
// marked sent) and exits 0 on SIGTERM, saying what it shipped.
func TestRelay(t *testing.T) {
	ns := testenv.RocketMQ(t)
	store := sqliteBackend.url(t)
	if r := idemq(t, nil, "migrate", "--store", store, "--outbox"); r.code != 0 {
		t.Fatalf("migrate: %v", r)
	}
	addOutboxRows(t, store, 3)

	r := startRelay(t, "--store", store, "--namesrv", ns)
	o, _ := openOutbox(t, store)
	testkit.WaitFor(t, "the rows sent", func() bool {
		st, err := o.Count(context.Background())
		return err == nil && st.Sent == 3
	})
	if last := r.stop(t); last != "stopped: shipped 3, retried 0, parked 0, lease lost 0" {
		t.Errorf("last line %q", last)
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
	r := startRelay(t, "--store", store, "--namesrv", ns, "--notify", "--poll-interval", "1h")
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
	r.stop(t)
}

// relayProc is a running 'idemq relay'.
type relayProc struct {
	cmd    *exec.Cmd
	lines  *bufio.Scanner // its stdout
	stderr bytes.Buffer
}

// startRelay starts 'idemq relay' with args, killed when t ends, and waits
// for its first line, which says it relays.
func startRelay(t *testing.T, args ...string) *relayProc {
	t.Helper()
	r := &relayProc{cmd: exec.Command(binary(t), append([]string{"relay"}, args...)...)}
	r.cmd.Stderr = &r.stderr
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.cmd.Process.Kill() })
	r.lines = bufio.NewScanner(stdout)
	if !r.lines.Scan() || !strings.HasPrefix(r.lines.Text(), "relaying idemq_outbox at ") {
		err := r.cmd.Wait() // before reading what it wrote to stderr
		t.Fatalf("first line %q, %v; stderr:\n%s", r.lines.Text(), err, r.stderr.String())
	}
	return r
}

// stop sends the relay SIGTERM, fails t unless it exits 0 within a
// minute, and returns the last line it wrote.
func (r *relayProc) stop(t *testing.T) string {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	last := ""
	done := make(chan error, 1)
	go func() {
		for r.lines.Scan() { // to the end, before Wait closes the pipe
			last = r.lines.Text()
		}
		done <- r.cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v; stderr:\n%s", err, r.stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("idemq relay still running a minute after SIGTERM")
	}
	return last
}
