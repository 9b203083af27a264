package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/outbox"
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

	cmd := exec.Command(binary(t), "relay", "--store", store, "--namesrv", ns)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), "relaying idemq_outbox at ") {
		err := cmd.Wait() // before reading what it wrote to stderr
		t.Fatalf("first line %q, %v; stderr:\n%s", lines.Text(), err, stderr.String())
	}

	addr, err := resolveStore(store)
	if err != nil {
		t.Fatal(err)
	}
	db, err := addr.openSQL(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	o, err := outbox.New(db, addr.Dialect, nil, outbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the rows sent", func() bool {
		st, err := o.Stats(context.Background())
		return err == nil && st.Sent == 3
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !lines.Scan() || lines.Text() != "stopped: shipped 3, retried 0, parked 0, lease lost 0" {
		t.Errorf("last line %q", lines.Text())
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) || err != nil {
			t.Fatalf("exit after SIGTERM: %v; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("idemq relay still running a minute after SIGTERM")
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
	cmd := exec.Command(binary(t), "relay", "--store", store, "--namesrv", ns, "--notify", "--poll-interval", "1h")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), "relaying idemq_outbox at ") {
		err := cmd.Wait()
		t.Fatalf("first line %q, %v; stderr:\n%s", lines.Text(), err, stderr.String())
	}
	addOutboxRows(t, store, 3)
	addr, err := resolveStore(store)
	if err != nil {
		t.Fatal(err)
	}
	db, err := addr.openSQL(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	o, err := outbox.New(db, addr.Dialect, nil, outbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sent := range []int64{3, 6} {
		if sent > 3 {
			addOutboxRows(t, store, 3)
		}
		testkit.WaitFor(t, fmt.Sprint(sent, " rows sent"), func() bool {
			st, err := o.Stats(context.Background())
			return err == nil && st.Sent == sent
		})
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v; stderr:\n%s", err, stderr.String())
	}
}

// TestRelayBadInput runs relays that cannot start: exit 2 before any store
// or broker is reached.
func TestRelayBadInput(t *testing.T) {
	store := "sqlite:///nonexistent/dir/x.db"
	for _, tt := range []struct {
		name string
		args []string
		msg  string
	}{
		{"no broker", []string{}, "give --namesrv ADDR"},
		{"both brokers", []string{"--namesrv", "a:1", "--proxy", "b:2"}, "give --namesrv ADDR"},
		{"bad batch", []string{"--namesrv", "a:1", "--batch", "0"}, "batch 0"},
		{"bad level", []string{"--namesrv", "a:1", "--log-level", "loud"}, `--log-level "loud"`},
		{"notify on SQLite", []string{"--namesrv", "a:1", "--notify"}, "--notify: sqlite:///nonexistent/dir/x.db is not PostgreSQL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantFail(t, inProcess(t, "", append([]string{"relay", "--store", store}, tt.args...)...), exitUsage, tt.msg)
		})
	}
}
