// Package containers starts the servers internal/testenv starts (Redis,
// MariaDB, PostgreSQL, RocketMQ 4.x, RocketMQ 5.x with its gRPC proxy,
// Apache Kafka in KRaft mode, nats-server with JetStream) from
// container images through testcontainers-go, for machines with Docker, or
// podman's Docker API, instead of Debian's packages. [Start] is a
// [testenv.Starter]: the servers it returns are named by the same IDEMQ_*
// variables, so withcontainers runs every test and the demo as withservers
// does.
//
// The package is a module of its own: neither idemq's go.mod nor the go.sum
// of a module that imports idemq gains testcontainers, the Docker SDK and
// their dependencies.
//
// # Images
//
// Each server's image defaults to the public one a Docker user pulls, and
// its variable overrides it (scripts/standin-images.sh sets them to stand-ins
// built where no registry is reachable):
//
//	IDEMQ_REDIS_IMAGE      redis:7.2
//	IDEMQ_MYSQL_IMAGE      mariadb:11.4
//	IDEMQ_POSTGRES_IMAGE   postgres:16
//	IDEMQ_ROCKETMQ_IMAGE   apache/rocketmq:4.9.7
//	IDEMQ_ROCKETMQ5_IMAGE  apache/rocketmq:5.5.0
//	IDEMQ_KAFKA_IMAGE      apache/kafka:4.4.0
//	IDEMQ_NATS_IMAGE       nats:2.15.3
//
// # Clean-up
//
// [testenv.Server.Stop] removes the server's containers and their volumes.
// testcontainers' reaper (Ryuk) also removes them should the process die
// first; where its image cannot be pulled, TESTCONTAINERS_RYUK_DISABLED=true
// turns it off, and every container carries the label idemq.session (the
// value of IDEMQ_CONTAINERS_SESSION, if set) for the caller to remove
// leftovers by.
package containers

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/docker/go-connections/nat"
	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"
	tcmariadb "github.com/testcontainers/testcontainers-go/modules/mariadb"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/idemq/idemq/internal/testenv"
)

// Images are the default image of each server, by testenv's server name.
var Images = map[string]string{
	"redis":     "redis:7.2",
	"mysql":     "mariadb:11.4",
	"postgres":  "postgres:16",
	"rocketmq":  "apache/rocketmq:4.9.7",
	"rocketmq5": "apache/rocketmq:5.5.0",
	"kafka":     "apache/kafka:4.4.0",
	"nats":      "nats:2.15.3",
}

// Image returns the image Start runs for the named server: its
// IDEMQ_<NAME>_IMAGE variable, else the default in [Images].
func Image(name string) string {
	return cmp.Or(os.Getenv("IDEMQ_"+strings.ToUpper(name)+"_IMAGE"), Images[name])
}

// startTimeout bounds waiting for a container to serve; like testenv's, it
// is a hang guard (a dead container is seen at once), not a guess at a
// loaded machine's speed. It is every wait strategy's own timeout too:
// theirs default to a minute, less than a JVM's start on a busy machine.
const startTimeout = 10 * time.Minute

var starters = map[string]func(ctx context.Context, image string, opts []testcontainers.ContainerCustomizer) (*testenv.Server, error){
	"redis":     startRedis,
	"mysql":     startMariaDB,
	"postgres":  startPostgres,
	"rocketmq":  startRocketMQ,
	"rocketmq5": startRocketMQ5,
	"kafka":     startKafka,
	"nats":      startNATS,
}

// Start starts the named server ("redis", "mysql", "postgres", "rocketmq",
// "rocketmq5", "kafka", "nats") in containers, the containers' output copied to log, and
// returns once it serves, as [testenv.Start] does.
func Start(ctx context.Context, name string, log io.Writer) (*testenv.Server, error) {
	start, ok := starters[name]
	if !ok {
		return nil, fmt.Errorf("containers: unknown server %q", name)
	}
	begin := time.Now()
	opts := []testcontainers.ContainerCustomizer{
		testcontainers.WithLabels(map[string]string{"idemq.session": os.Getenv("IDEMQ_CONTAINERS_SESSION")}),
	}
	if log != io.Discard {
		opts = append(opts, testcontainers.WithLogConsumers(&logCopier{w: log, name: name}))
	}
	srv, err := start(ctx, Image(name), opts)
	if err != nil {
		return nil, fmt.Errorf("containers: %s (%s): %w", name, Image(name), err)
	}
	srv.Started = time.Since(begin)
	return srv, nil
}

// logCopier copies a container's output to w, each line prefixed with the
// server's name.
type logCopier struct {
	w    io.Writer
	name string
}

func (l *logCopier) Accept(entry testcontainers.Log) {
	fmt.Fprintf(l.w, "[%s] %s", l.name, entry.Content)
}

// terminate returns a stop function removing cs (with their anonymous
// volumes) at once: the data is thrown away. A nil container, as
// testcontainers returns with some errors, is skipped.
func terminate(cs ...testcontainers.Container) func() error {
	return func() error {
		var errs []error
		for _, c := range cs {
			errs = append(errs, testcontainers.TerminateContainer(c, testcontainers.StopTimeout(0)))
		}
		return errors.Join(errs...)
	}
}

// endpoint returns the host:port at which the host reaches c's port.
// testcontainers names the host "localhost" for a local engine; 127.0.0.1
// is what the published ports listen on, whichever "localhost" resolves to
// first. c is a container, or one a wait strategy is waiting for.
func endpoint(ctx context.Context, c wait.StrategyTarget, port nat.Port) (string, error) {
	host, err := c.Host(ctx)
	if err != nil {
		return "", err
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	mapped, err := c.MappedPort(ctx, port)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(host, mapped.Port()), nil
}

func startRedis(ctx context.Context, image string, opts []testcontainers.ContainerCustomizer) (*testenv.Server, error) {
	// The module's own wait gives the port 10 s.
	ready := []wait.Strategy{
		wait.ForLog("Ready to accept connections").WithStartupTimeout(startTimeout),
		wait.ForListeningPort("6379/tcp").WithStartupTimeout(startTimeout),
	}
	// As testenv runs it: no persistence.
	c, err := tcredis.Run(ctx, image, append(opts,
		testcontainers.WithCmd("redis-server", "--save", "", "--appendonly", "no"),
		testcontainers.WithWaitStrategyAndDeadline(startTimeout, ready...))...)
	if err != nil {
		return nil, errors.Join(err, terminate(c)())
	}
	srv, err := redisServer(ctx, c)
	if err != nil {
		return nil, errors.Join(err, terminate(c)())
	}
	return srv, nil
}

func redisServer(ctx context.Context, c testcontainers.Container) (*testenv.Server, error) {
	addr, err := endpoint(ctx, c, "6379/tcp")
	if err != nil {
		return nil, err
	}
	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	info, err := client.InfoMap(ctx, "server").Result()
	if err != nil {
		return nil, err
	}
	return testenv.NewServer("redis", addr, info["Server"]["redis_version"],
		map[string]string{"IDEMQ_REDIS_ADDR": addr}, 0, terminate(c)), nil
}

func startMariaDB(ctx context.Context, image string, opts []testcontainers.ContainerCustomizer) (*testenv.Server, error) {
	dsn := func(addr string) string {
		cfg := mysql.NewConfig()
		cfg.User, cfg.Net, cfg.Addr, cfg.ParseTime = "root", "tcp", addr, true
		cfg.Params = map[string]string{"charset": "utf8mb4"}
		return cfg.FormatDSN()
	}
	// The module waits for a log line of the MariaDB Foundation's builds
	// ("mariadb.org binary distribution"); a query through the published
	// port works with every build, and only once the first start's
	// temporary server (socket only) has made way for the real one.
	ready := wait.ForSQL("3306/tcp", "mysql", func(host string, port nat.Port) string {
		return dsn(net.JoinHostPort(host, port.Port()))
	}).WithStartupTimeout(startTimeout)
	c, err := tcmariadb.Run(ctx, image, append(opts,
		// The account tests use creates a database per test.
		tcmariadb.WithUsername("root"), tcmariadb.WithPassword(""), tcmariadb.WithDatabase("idemq"),
		// Durability is traded for speed, as testenv does.
		testcontainers.WithCmd("mariadbd", "--skip-log-bin", "--performance-schema=OFF",
			"--innodb-buffer-pool-size=128M", "--innodb-log-file-size=16M",
			"--innodb-flush-log-at-trx-commit=2", "--max-connections=500"),
		testcontainers.WithWaitStrategyAndDeadline(startTimeout, ready))...)
	if err != nil {
		return nil, errors.Join(err, terminate(c)())
	}
	addr, err := endpoint(ctx, c, "3306/tcp")
	if err != nil {
		return nil, errors.Join(err, terminate(c)())
	}
	version, err := queryVersion(ctx, "mysql", dsn(addr), "SELECT VERSION()")
	if err != nil {
		return nil, errors.Join(err, terminate(c)())
	}
	return testenv.NewServer("mysql", dsn(addr), "MariaDB "+version,
		map[string]string{"IDEMQ_MYSQL_DSN": dsn(addr)}, 0, terminate(c)), nil
}

func startPostgres(ctx context.Context, image string, opts []testcontainers.ContainerCustomizer) (*testenv.Server, error) {
	dsn := func(addr string) string {
		return fmt.Sprintf("postgres://postgres:postgres@%s/postgres?sslmode=disable", addr)
	}
	// Like MariaDB's, the first start runs a temporary server on the socket
	// only: a query through the published port reaches the real one.
	ready := wait.ForSQL("5432/tcp", "pgx", func(host string, port nat.Port) string {
		return dsn(net.JoinHostPort(host, port.Port()))
	}).WithStartupTimeout(startTimeout)
	c, err := tcpostgres.Run(ctx, image, append(opts,
		tcpostgres.WithUsername("postgres"), tcpostgres.WithPassword("postgres"), tcpostgres.WithDatabase("postgres"),
		testcontainers.WithCmd("postgres", "-c", "fsync=off", "-c", "synchronous_commit=off",
			"-c", "full_page_writes=off", "-c", "max_connections=300"),
		testcontainers.WithWaitStrategyAndDeadline(startTimeout, ready))...)
	if err != nil {
		return nil, errors.Join(err, terminate(c)())
	}
	addr, err := endpoint(ctx, c, "5432/tcp")
	if err != nil {
		return nil, errors.Join(err, terminate(c)())
	}
	version, err := queryVersion(ctx, "pgx", dsn(addr), "SHOW server_version")
	if err != nil {
		return nil, errors.Join(err, terminate(c)())
	}
	return testenv.NewServer("postgres", dsn(addr), "PostgreSQL "+version,
		map[string]string{"IDEMQ_POSTGRES_DSN": dsn(addr)}, 0, terminate(c)), nil
}

func queryVersion(ctx context.Context, driver, dsn, query string) (string, error) {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return "", err
	}
	defer db.Close()
	var v string
	return v, db.QueryRowContext(ctx, query).Scan(&v)
}
