package testenv

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"
)

// PrivateRedis is a redis-server of its own for a test that restarts it.
// By default it keeps nothing on disk, so a restart loses every key, as a
// Redis without persistence does (or a failover to an empty replica), and
// comes back on the same address.
type PrivateRedis struct {
	privateServer
}

// StartPrivateRedis starts a PrivateRedis that is stopped when tb ends,
// with args added to redis-server's command line: "--appendonly", "yes",
// "--appendfsync", "always" makes one that keeps every key it acknowledged
// across [PrivateRedis.Kill] and [PrivateRedis.Start]. A missing
// redis-server skips tb, or fails it under CI=true (see [Missing]).
func StartPrivateRedis(tb testing.TB, args ...string) *PrivateRedis {
	tb.Helper()
	r, err := NewPrivateRedis(tb.Context(), args...)
	if err != nil {
		Missing(tb, err.Error())
		return nil
	}
	tb.Cleanup(func() {
		if err := r.Stop(); err != nil {
			tb.Errorf("testenv: %v", err)
		}
	})
	return r
}

// NewPrivateRedis starts a PrivateRedis for code without a testing.TB, such
// as a TestMain that serves examples, with args as [StartPrivateRedis]
// takes them. The caller stops it.
func NewPrivateRedis(ctx context.Context, args ...string) (*PrivateRedis, error) {
	bin, err := findBinary(nil, "redis-server")
	if err != nil {
		return nil, fmt.Errorf("private redis: %w (Debian package redis-server)", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("private redis: %w", err)
	}
	dir, err := os.MkdirTemp("", "idemq-private-redis-")
	if err != nil {
		return nil, fmt.Errorf("private redis: %w", err)
	}
	r := &PrivateRedis{privateServer{name: "private redis", dir: dir, port: port,
		launch: func(ctx context.Context) (*process, error) {
			return launchRedis(ctx, io.Discard, bin, dir, port, args...)
		}}}
	if err := r.begin(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// Addr is the server's host:port; it stays the same across restarts.
func (r *PrivateRedis) Addr() string { return hostPort(r.port) }

// Restart stops the server, losing every key (unless started with
// persistence), and starts it again on the same port. Clients see their
// connections closed and reconnect.
func (r *PrivateRedis) Restart(ctx context.Context) error { return r.restart(ctx) }

// Kill kills the server with SIGKILL, as a crash does, and leaves it down
// until [PrivateRedis.Start]: clients see their connections reset and new
// ones refused.
func (r *PrivateRedis) Kill() error { return r.kill() }

// Start starts the server again on the same port after Kill, with what it
// had persisted (nothing, unless started with persistence).
func (r *PrivateRedis) Start(ctx context.Context) error { return r.start(ctx) }
