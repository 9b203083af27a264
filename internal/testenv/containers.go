package testenv

import (
	"context"
	"fmt"
	"net"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Images used where no local server is installed but Docker answers. They
// match the versions docker/compose.yaml runs.
const (
	redisImage    = "redis:7.2"
	mariadbImage  = "mariadb:11.4"
	postgresImage = "postgres:16"
)

// startContainer runs image with port exposed and waits for it to listen.
func startContainer(ctx context.Context, image, port string, env map[string]string, waitFor wait.Strategy) (host string, stop func() error, err error) {
	c, err := testcontainers.Run(ctx, image,
		testcontainers.WithExposedPorts(port),
		testcontainers.WithEnv(env),
		testcontainers.WithWaitStrategy(waitFor))
	if err != nil {
		if c != nil {
			testcontainers.TerminateContainer(c)
		}
		return "", nil, fmt.Errorf("container %s: %w", image, err)
	}
	endpoint, err := c.PortEndpoint(ctx, port, "")
	if err != nil {
		testcontainers.TerminateContainer(c)
		return "", nil, fmt.Errorf("container %s: %w", image, err)
	}
	return endpoint, func() error { return testcontainers.TerminateContainer(c) }, nil
}

func redisContainer(ctx context.Context) (*Server, error) {
	addr, stop, err := startContainer(ctx, redisImage, "6379/tcp", nil, wait.ForListeningPort("6379/tcp"))
	if err != nil {
		return nil, err
	}
	return &Server{Name: "redis", Addr: addr, Version: redisImage, stop: stop}, nil
}

func mariadbContainer(ctx context.Context) (*Server, error) {
	addr, stop, err := startContainer(ctx, mariadbImage, "3306/tcp",
		map[string]string{"MARIADB_ALLOW_EMPTY_ROOT_PASSWORD": "1"},
		wait.ForLog("ready for connections").WithOccurrence(2))
	if err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(addr)
	dsn := fmt.Sprintf("root@tcp(%s)/?parseTime=true&charset=utf8mb4", net.JoinHostPort(host, port))
	return &Server{Name: "mysql", Addr: dsn, Version: mariadbImage, stop: stop}, nil
}

func postgresContainer(ctx context.Context) (*Server, error) {
	addr, stop, err := startContainer(ctx, postgresImage, "5432/tcp",
		map[string]string{"POSTGRES_HOST_AUTH_METHOD": "trust"},
		wait.ForLog("database system is ready to accept connections").WithOccurrence(2))
	if err != nil {
		return nil, err
	}
	dsn := fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", addr)
	return &Server{Name: "postgres", Addr: dsn, Version: postgresImage, stop: stop}, nil
}
