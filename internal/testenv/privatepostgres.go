package testenv

import (
	"context"
	"io"
	"os"
	"testing"
)

// PrivatePostgres is a PostgreSQL server of its own for a test that
// restarts it. It keeps its data across a restart, as a server restarted
// for an upgrade or a failover does; clients see their connections closed.
type PrivatePostgres struct {
	privateServer
	dsn string
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
	server, cred, err := initPostgres(ctx, dir)
	var port int
	if err == nil {
		port, err = freePort()
	}
	if err != nil {
		os.RemoveAll(dir)
		Missing(tb, err.Error())
		return nil
	}
	r := &PrivatePostgres{privateServer: privateServer{name: "private postgres", dir: dir, port: port}}
	r.launch = func(ctx context.Context) (*process, error) {
		p, dsn, _, err := launchPostgres(ctx, io.Discard, server, cred, dir, port)
		if r.dsn == "" { // the first launch's: DSN reads it unlocked later
			r.dsn = dsn
		}
		return p, err
	}
	if err := r.begin(ctx); err != nil {
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
func (r *PrivatePostgres) Restart(ctx context.Context) error { return r.restart(ctx) }
