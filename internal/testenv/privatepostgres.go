package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"testing"
)

// PrivatePostgres is a PostgreSQL server of its own for a test that
// restarts it. It keeps its data across a restart, as a server restarted
// for an upgrade or a failover does; clients see their connections closed.
type PrivatePostgres struct {
	server, dir string
	cred        *syscall.Credential
	port        int
	dsn         string

	mu sync.Mutex
	p  *process
}

// StartPrivatePostgres starts a PrivatePostgres that is stopped when tb
// ends. A missing PostgreSQL skips tb, or fails it under CI=true (see
// [Missing]).
func StartPrivatePostgres(tb testing.TB) *PrivatePostgres {
	tb.Helper()
	dir, err := os.MkdirTemp("", "idemq-private-postgres-")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(tb.Context(), StartTimeout)
	defer cancel()
	r := &PrivatePostgres{dir: dir}
	r.server, r.cred, err = initPostgres(ctx, dir)
	if err == nil {
		r.port, err = freePort()
	}
	if err == nil {
		r.p, r.dsn, _, err = launchPostgres(ctx, io.Discard, r.server, r.cred, dir, r.port)
	}
	if err != nil {
		os.RemoveAll(dir)
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

// DSN is the server's DSN (URL form, for pgx), for its database postgres;
// it stays the same across restarts.
func (r *PrivatePostgres) DSN() string { return r.dsn }

// Restart stops the server (a fast shutdown: sessions are ended, open
// transactions rolled back) and starts it again on the same port.
func (r *PrivatePostgres) Restart(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.p == nil {
		return errors.New("private postgres: restart after stop")
	}
	if err := r.p.stop(); err != nil {
		r.p = nil
		return fmt.Errorf("private postgres: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	p, _, _, err := launchPostgres(ctx, io.Discard, r.server, r.cred, r.dir, r.port)
	if err != nil {
		return fmt.Errorf("private postgres: restart on port %d: %w", r.port, err)
	}
	r.p = p
	return nil
}

// Stop stops the server and removes its directory. It is safe to call
// more than once.
func (r *PrivatePostgres) Stop() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var err error
	if r.p != nil {
		err = r.p.stop()
		r.p = nil
	}
	return errors.Join(err, os.RemoveAll(r.dir))
}
