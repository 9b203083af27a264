package testenv

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// natsRelease is the nats-server release the tests run, built from its Go
// module.
const natsRelease = "v2.15.3"

func init() {
	register(service{name: "nats", env: "IDEMQ_NATS_URL", local: startNATSService})
}

// NATS returns the URL ("nats://host:port") of a real nats-server with
// JetStream enabled.
func NATS(tb testing.TB) string {
	tb.Helper()
	return lookup(tb, services["nats"])
}

func startNATSService(ctx context.Context, dir string, log io.Writer) (*Server, error) {
	n, err := newPrivateNATS(ctx, dir, log)
	if err != nil {
		return nil, err
	}
	return &Server{Name: "nats", Addr: n.URL(), Version: "nats-server " + natsRelease, stop: n.Stop}, nil
}

// PrivateNATS is a nats-server of a test's own, with JetStream, its store
// in a directory of its own, on a port that stays the same across
// restarts.
type PrivateNATS struct {
	privateServer
}

// StartPrivateNATS starts a PrivateNATS that is stopped, and its store
// removed, when tb ends. A nats-server that cannot be had skips tb, or
// fails it under CI=true (see [Missing]).
func StartPrivateNATS(tb testing.TB) *PrivateNATS {
	tb.Helper()
	dir, err := os.MkdirTemp("", "idemq-private-nats-")
	if err != nil {
		tb.Fatal(err)
	}
	n, err := newPrivateNATS(tb.Context(), dir, io.Discard)
	if err != nil {
		os.RemoveAll(dir)
		Missing(tb, err.Error())
		return nil
	}
	tb.Cleanup(func() {
		if err := n.Stop(); err != nil {
			tb.Errorf("testenv: %v", err)
		}
	})
	return n
}

// newPrivateNATS starts a PrivateNATS in dir, which its Stop removes.
func newPrivateNATS(ctx context.Context, dir string, log io.Writer) (*PrivateNATS, error) {
	bin, err := natsInstall(ctx)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("testenv: nats: %w", err)
	}
	n := &PrivateNATS{privateServer{name: "private nats", dir: dir, port: port,
		launch: func(ctx context.Context) (*process, error) { return launchNATS(ctx, log, bin, dir, port) }}}
	if err := n.begin(ctx); err != nil {
		return nil, fmt.Errorf("testenv: nats: %w", err)
	}
	return n, nil
}

// URL is the server's client URL; it stays the same across restarts.
func (n *PrivateNATS) URL() string { return "nats://" + hostPort(n.port) }

// Kill kills the server with SIGKILL and leaves it down until Start: what
// it had not synced to its store is lost (JetStream syncs every 2 minutes
// by default; recent acknowledgements are then redelivered).
func (n *PrivateNATS) Kill() error { return n.kill() }

// Start starts the server while it is down, on its store, and returns
// once JetStream serves.
func (n *PrivateNATS) Start(ctx context.Context) error { return n.start(ctx) }

// launchNATS runs bin with JetStream on port, its store in dir/store, and
// waits until it greets a client with JetStream enabled.
func launchNATS(ctx context.Context, log io.Writer, bin, dir string, port int) (*process, error) {
	p, err := startProcess(log, filepath.Join(dir, "nats.log"), nil, bin,
		"-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", filepath.Join(dir, "store"))
	if err != nil {
		return nil, err
	}
	ready := func(ctx context.Context) error {
		d := net.Dialer{Timeout: time.Second}
		conn, err := d.DialContext(ctx, "tcp", hostPort(port))
		if err != nil {
			return err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
		info, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil {
			return err
		}
		if !strings.Contains(info, `"jetstream":true`) {
			return fmt.Errorf("greeting without JetStream: %s", info)
		}
		return nil
	}
	if err := waitReady(ctx, p, ready); err != nil {
		_ = p.stop()
		return nil, err
	}
	return p, nil
}

// natsInstall returns the nats-server binary: the one on PATH, else
// $IDEMQ_CACHE_DIR/nats-server-v2.15.3/nats-server, built on first use
// with go install from its module (about 2 minutes with a cold build
// cache, 20 s with a warm one). A lock file keeps concurrent test
// processes from building it twice.
func natsInstall(ctx context.Context) (string, error) {
	if bin, err := exec.LookPath("nats-server"); err == nil {
		return bin, nil
	}
	root, err := cacheDir()
	if err != nil {
		return "", fmt.Errorf("testenv: nats: %w", err)
	}
	home := filepath.Join(root, "nats-server-"+natsRelease)
	bin := filepath.Join(home, "nats-server")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(home, 0o755); err != nil {
		return "", fmt.Errorf("testenv: nats: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(home, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("testenv: nats: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("testenv: nats: %w", err)
	}
	if _, err := os.Stat(bin); err == nil {
		return bin, nil // built while this one waited
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("testenv: nats: build nats-server: %w", err)
	}
	tmp, err := os.MkdirTemp(home, ".bin-*")
	if err != nil {
		return "", fmt.Errorf("testenv: nats: %w", err)
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, goBin, "install", "github.com/nats-io/nats-server/v2@"+natsRelease)
	// Outside any module, with no flags of the caller's (-race, -mod):
	// the server as its release builds it.
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=", "CGO_ENABLED=0", "GOWORK=off")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("testenv: nats: build nats-server %s (needs the Go module proxy the first time): %w\n%s", natsRelease, err, lastLines(out.String(), 20))
	}
	if err := os.Rename(filepath.Join(tmp, "nats-server"), bin); err != nil {
		return "", fmt.Errorf("testenv: nats: %w", err)
	}
	return bin, nil
}
