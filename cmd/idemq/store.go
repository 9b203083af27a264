package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // "pgx"
	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite" // "sqlite"

	"github.com/idemq/idemq/internal/sqldialect"
)

// storeEnv names the environment variable that gives the store when --store
// is not set.
const storeEnv = "IDEMQ_STORE"

// kindRedis is the Kind of a Redis store; an SQL store's Kind is the name of
// its dialect, which is its URL's scheme.
const kindRedis = "redis"

// storeUsage is the --store flag's help, shared by every command that takes
// one.
const storeUsage = "store `URL`: redis://[user:pass@]host:port[/db], rediss://..., " +
	"mysql://user:pass@host:port/db[?params], postgres://user:pass@host:port/db[?params], " +
	"sqlite:///abs/path.db or sqlite:relative.db (default $" + storeEnv + ")"

// A storeAddr is a parsed store URL: which kind of server, and how to reach it.
type storeAddr struct {
	// Kind is kindRedis or an SQL dialect's name.
	Kind string
	// Dialect is an SQL store's, which sqldedupe and sqlidgen take alike;
	// 0 for Redis.
	Dialect sqldialect.Dialect
	// Redacted is the URL for messages, without its password (see
	// redact).
	Redacted string
	// Redis holds the client options of a redis:// or rediss:// URL.
	Redis *redis.Options
	// Driver and DSN open an SQL store with sql.Open.
	Driver, DSN string
	// Flag is the flag that named the store, for messages; "" for --store.
	Flag string
}

// String returns the redacted URL.
func (a *storeAddr) String() string { return a.Redacted }

// IsSQL reports whether the store is an SQL database.
func (a *storeAddr) IsSQL() bool { return a.Kind != kindRedis }

// storeFlag registers --store on fs. Pass its value to resolveStore once fs
// is parsed.
func storeFlag(fs *flag.FlagSet) *string {
	return fs.String("store", "", storeUsage)
}

// resolveStore parses raw, or $IDEMQ_STORE when raw is empty. There is no
// default address: a store nobody named is a usage error, since guessing a
// local server could read or change the wrong data.
func resolveStore(raw string) (*storeAddr, error) {
	if raw == "" {
		raw = os.Getenv(storeEnv)
		if raw == "" {
			return nil, usagef("no store: set --store URL or the environment variable %s (e.g. redis://127.0.0.1:6379/0)", storeEnv)
		}
	}
	a, err := parseStore(raw)
	if err != nil {
		return nil, usageError{err: err}
	}
	return a, nil
}

// resolveStoreFlag parses the store URL raw given by --flagName, a flag
// other than --store, which $IDEMQ_STORE does not stand in for.
func resolveStoreFlag(raw, flagName string) (*storeAddr, error) {
	a, err := parseStore(raw)
	if err != nil {
		return nil, usageError{err: fmt.Errorf("--%s: %w", flagName, err)}
	}
	a.Flag = flagName
	return a, nil
}

// parseStore parses a store URL:
//
//	redis://[user:pass@]host:port[/db][?options]  go-redis's URL options
//	rediss://...                                  the same over TLS
//	mysql://user:pass@host[:port]/db[?params]     go-sql-driver/mysql params
//	postgres://... or postgresql://...            pgx's URL form
//	sqlite:///abs/path.db or sqlite:relative.db   modernc.org/sqlite
//
// A SQLite URL without query parameters gets WAL mode, a busy timeout and
// immediate transactions, as sqldedupe and sqlidgen advise.
func parseStore(raw string) (*storeAddr, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error repeats the URL, password included.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("store URL: %v: want redis://, rediss://, mysql://, postgres:// or sqlite:", err)
	}
	a := &storeAddr{Redacted: redact(u)}
	bad := func(why string) (*storeAddr, error) {
		return nil, fmt.Errorf("store URL %s: %s", a.Redacted, why)
	}
	switch u.Scheme {
	case "redis", "rediss":
		// go-redis would take an empty host for localhost:6379: an
		// address nobody chose.
		if u.Hostname() == "" {
			return bad("name the server: want redis://[user:pass@]host:port[/db]")
		}
		opt, err := redis.ParseURL(raw)
		if err != nil {
			return bad(strings.TrimPrefix(err.Error(), "redis: "))
		}
		a.Kind, a.Redis = kindRedis, opt
		return a, nil
	case "":
		// Text without a scheme is not shown: it may hold a password
		// anywhere.
		return nil, errors.New("store URL without a scheme: want redis://, rediss://, mysql://, postgres:// or sqlite:")
	}
	d, err := sqldialect.Parse(u.Scheme)
	if err != nil {
		return bad(fmt.Sprintf("unknown scheme %q: want redis://, rediss://, mysql://, postgres:// or sqlite:", u.Scheme))
	}
	a.Kind, a.Dialect = d.String(), d
	switch d {
	case sqldialect.MySQL:
		if u.Host == "" {
			return bad("want mysql://user:pass@host:port/db")
		}
		db := strings.TrimPrefix(u.Path, "/")
		if db == "" || strings.Contains(db, "/") {
			return bad("name one database as the path, e.g. mysql://user:pass@host:3306/app")
		}
		cfg := mysql.NewConfig()
		cfg.Net, cfg.Addr, cfg.DBName = "tcp", u.Host, db
		if u.Port() == "" {
			cfg.Addr = u.Host + ":3306"
		}
		if u.User != nil {
			cfg.User = u.User.Username()
			cfg.Passwd, _ = u.User.Password()
		}
		dsn := cfg.FormatDSN()
		if u.RawQuery != "" {
			sep := "?"
			if strings.Contains(dsn, "?") {
				sep = "&"
			}
			dsn += sep + u.RawQuery
		}
		// ParseDSN checks the parameters, so a typo fails here rather
		// than at the first query.
		if _, err := mysql.ParseDSN(dsn); err != nil {
			return bad(err.Error())
		}
		a.Driver, a.DSN = "mysql", dsn
	case sqldialect.Postgres:
		if u.Host == "" {
			return bad("want postgres://user:pass@host:port/db")
		}
		a.Driver, a.DSN = "pgx", raw
	case sqldialect.SQLite:
		path := u.Opaque // sqlite:relative.db
		if path == "" {
			if u.Host != "" {
				return bad("want sqlite:///absolute/path.db (three slashes) or sqlite:relative.db")
			}
			path = u.Path // sqlite:///abs/path.db
		}
		if path == "" {
			return bad("name the database file: sqlite:///absolute/path.db or sqlite:relative.db")
		}
		if p, err := url.PathUnescape(path); err == nil {
			path = p
		}
		q := u.RawQuery
		if q == "" {
			q = "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate"
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return bad(err.Error())
		}
		a.Driver, a.DSN = "sqlite", "file:"+abs+"?"+q
	}
	return a, nil
}

// pingTimeout bounds the first contact with a store, so that an unreachable
// one fails in seconds rather than after the command's whole timeout.
const pingTimeout = 5 * time.Second

// unreachable wraps the error of a store that did not answer with what to do.
func (a *storeAddr) unreachable(err error) error {
	named := "--store (or " + storeEnv + ")"
	if a.Flag != "" {
		named = "--" + a.Flag
	}
	return fmt.Errorf("%s store at %s: %w; check that the server runs and that %s names it", a.Kind, a.Redacted, err, named)
}

// openRedis returns a client of the Redis store, which has answered a PING.
// The caller, which has checked a.Kind, closes it.
func (a *storeAddr) openRedis(ctx context.Context) (*redis.Client, error) {
	c := redis.NewClient(a.Redis)
	if err := a.pingRedis(ctx, c); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// pingRedis checks that c, a client of the Redis store, reaches it.
func (a *storeAddr) pingRedis(ctx context.Context, c *redis.Client) error {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		return a.unreachable(err)
	}
	return nil
}

// openSQL returns the SQL store's database, which has answered a ping. The
// caller, which has checked a.Kind, closes it. A SQLite file must exist
// unless create is set, so that a mistyped path is not taken for an empty
// store.
func (a *storeAddr) openSQL(ctx context.Context, create bool) (*sql.DB, error) {
	if a.Dialect == sqldialect.SQLite && !create {
		path := strings.TrimPrefix(a.DSN, "file:")
		path, _, _ = strings.Cut(path, "?")
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("sqlite store at %s: %w; name an existing database file", a.Redacted, err)
		}
	}
	db, err := sql.Open(a.Driver, a.DSN)
	if err != nil {
		return nil, fmt.Errorf("%s store at %s: %w", a.Kind, a.Redacted, err)
	}
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, a.unreachable(err)
	}
	return db, nil
}

// redact returns u for messages with every place a password may sit
// masked: the password, a query parameter whose name says "pass" (pgx
// takes password=), and what a malformed URL may hold one in: all of one
// without a server (the opaque "redis:u:pw@h", which lacks "//", or
// "redis:/:pw@h"), and a fragment. A SQLite URL names a file and is shown as
// it is.
func redact(u *url.URL) string {
	if u.Scheme == "sqlite" {
		return u.String()
	}
	if u.Opaque != "" || u.Host == "" {
		// No server, so no well-formed place for a password either.
		return u.Scheme + ":xxxxx"
	}
	r := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	if u.User != nil {
		r.User = url.User(u.User.Username())
		if _, ok := u.User.Password(); ok {
			r.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
	}
	q := u.Query()
	for k := range q {
		if strings.Contains(strings.ToLower(k), "pass") {
			q.Set(k, "xxxxx")
		}
	}
	r.RawQuery = q.Encode()
	return r.String()
}
