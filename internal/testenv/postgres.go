package testenv

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

func init() {
	register(service{name: "postgres", env: "IDEMQ_POSTGRES_DSN", local: startPostgres})
}

// Postgres returns a DSN (URL form, for pgx) for a real PostgreSQL server.
// Each call gets a fresh, empty database where the account may create one;
// otherwise the DSN is returned as it is.
func Postgres(tb testing.TB) string {
	tb.Helper()
	return freshDatabase(tb, "pgx", lookup(tb, services["postgres"]), func(dsn, name string) (string, error) {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", err
		}
		u.Path = "/" + name
		return u.String(), nil
	})
}

func startPostgres(ctx context.Context, dir string, log io.Writer) (*Server, error) {
	server, cred, err := initPostgres(ctx, dir)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p, dsn, version, err := launchPostgres(ctx, log, server, cred, dir, port)
	if err != nil {
		return nil, err
	}
	return &Server{Name: "postgres", Addr: dsn, Version: "PostgreSQL " + version, stop: p.stop}, nil
}

// initPostgres makes a data directory in dir and returns the server binary
// and the account to run it as.
func initPostgres(ctx context.Context, dir string) (string, *syscall.Credential, error) {
	bins := []string{"/usr/lib/postgresql/17/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/15/bin"}
	initdb, err := findBinary(bins, "initdb")
	if err != nil {
		return "", nil, fmt.Errorf("postgres: %w (Debian package postgresql)", err)
	}
	cred, err := postgresCredential(dir)
	if err != nil {
		return "", nil, fmt.Errorf("postgres: %w", err)
	}
	if err := run(ctx, cred, initdb, "-D", filepath.Join(dir, "data"), "-U", "postgres", "--auth=trust",
		"--no-sync", "-E", "UTF8", "--no-instructions"); err != nil {
		return "", nil, fmt.Errorf("postgres: %w", err)
	}
	return filepath.Join(filepath.Dir(initdb), "postgres"), cred, nil
}

// launchPostgres starts server on the data directory initPostgres made in
// dir, listening on port, and returns once it answers, with its DSN and
// version.
func launchPostgres(ctx context.Context, log io.Writer, server string, cred *syscall.Credential, dir string, port int) (*process, string, string, error) {
	// Durability is traded for speed: the data dir dies with the test run.
	p, err := startProcess(log, filepath.Join(dir, "postgres.log"), cred, server,
		"-D", filepath.Join(dir, "data"), "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=300")
	if err != nil {
		return nil, "", "", fmt.Errorf("postgres: %w", err)
	}
	p.signal = syscall.SIGINT // fast shutdown
	dsn := fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", hostPort(port))
	var version string
	err = waitReady(ctx, p, func(ctx context.Context) error {
		return queryRow(ctx, "pgx", dsn, "SHOW server_version", &version)
	})
	if err != nil {
		p.stop()
		return nil, "", "", fmt.Errorf("postgres: %w", err)
	}
	return p, dsn, version, nil
}

// postgresCredential returns the user to run PostgreSQL as: it refuses to
// run as root, so root hands the data dir to the postgres account.
func postgresCredential(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root needs a postgres account: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}
