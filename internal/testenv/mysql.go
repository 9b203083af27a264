package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/go-sql-driver/mysql"
)

func init() {
	register(service{name: "mysql", env: "IDEMQ_MYSQL_DSN", local: startMariaDB})
}

// MySQL returns a go-sql-driver/mysql DSN for a real MariaDB or MySQL server.
// Each call gets a fresh, empty database where the account may create one;
// otherwise the DSN is returned as it is.
func MySQL(tb testing.TB) string {
	tb.Helper()
	return freshDatabase(tb, "mysql", lookup(tb, services["mysql"]), func(dsn, name string) (string, error) {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return "", err
		}
		cfg.DBName = name
		return cfg.FormatDSN(), nil
	})
}

func startMariaDB(ctx context.Context, dir string, log io.Writer) (*Server, error) {
	sbin := []string{"/usr/sbin", "/usr/local/mysql/bin"}
	server, err := findBinary(sbin, "mariadbd", "mysqld")
	if err != nil {
		return nil, fmt.Errorf("mysql: %w (Debian package mariadb-server)", err)
	}
	install, err := findBinary(sbin, "mariadb-install-db", "mysql_install_db")
	if err != nil {
		return nil, fmt.Errorf("mysql: %w (Debian package mariadb-server)", err)
	}
	data := filepath.Join(dir, "data")
	user := "--user=" + currentUser()
	if err := run(ctx, nil, install, "--no-defaults", "--datadir="+data, user,
		"--auth-root-authentication-method=normal", "--skip-test-db"); err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	// Durability is traded for speed: the data dir dies with the test run.
	p, err := startProcess(log, filepath.Join(dir, "mariadb.log"), nil, server,
		"--no-defaults", "--datadir="+data, user,
		"--port="+strconv.Itoa(port), "--bind-address=127.0.0.1",
		"--socket="+filepath.Join(dir, "mysqld.sock"), "--pid-file="+filepath.Join(dir, "mysqld.pid"),
		"--skip-log-bin", "--performance-schema=OFF", "--innodb-buffer-pool-size=128M",
		"--innodb-log-file-size=16M", "--innodb-flush-log-at-trx-commit=2", "--max-connections=500")
	if err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.ParseTime = "root", "tcp", hostPort(port), true
	cfg.Params = map[string]string{"charset": "utf8mb4"}
	dsn := cfg.FormatDSN()
	var version string
	err = waitReady(ctx, p, func(ctx context.Context) error {
		return queryRow(ctx, "mysql", dsn, "SELECT VERSION()", &version)
	})
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("mysql: %w", err)
	}
	return &Server{Name: "mysql", Addr: dsn, Version: "MariaDB " + version, stop: p.stop}, nil
}

func currentUser() string {
	if os.Geteuid() == 0 {
		return "root"
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return strconv.Itoa(os.Geteuid())
}

var databases atomic.Int64

// freshDatabase creates a database on the server behind dsn and returns
// withDB's DSN for it, or dsn itself when the account may not create one.
func freshDatabase(tb testing.TB, driver, dsn string, withDB func(dsn, name string) (string, error)) string {
	tb.Helper()
	name := fmt.Sprintf("idemq_t%d_%d", os.Getpid(), databases.Add(1))
	if err := execSQL(driver, dsn, "CREATE DATABASE "+name); err != nil {
		tb.Logf("testenv: %s: no fresh database (%v); using the DSN as given", driver, err)
		return dsn
	}
	drop := "DROP DATABASE " + name
	if driver == "pgx" {
		drop += " WITH (FORCE)" // ends connections a test left open
	}
	tb.Cleanup(func() {
		// A server named by the environment outlives the tests: leave it
		// as it was.
		if err := execSQL(driver, dsn, drop); err != nil {
			tb.Logf("testenv: %s: %v", driver, err)
		}
	})
	out, err := withDB(dsn, name)
	if err != nil {
		tb.Fatalf("testenv: %s: %v", driver, err)
	}
	return out
}

func queryRow(ctx context.Context, driver, dsn, query string, dest any) error {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.QueryRowContext(ctx, query).Scan(dest)
}

func execSQL(driver, dsn, stmt string) error {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Exec(stmt)
	return err
}
