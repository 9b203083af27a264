package containers

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/idemq/idemq/internal/testenv"
)

// NATS runs as the nats image's documentation runs it with JetStream:
// `nats-server -js` (the image's entry point), its store in the
// container. A client needs only the address it was given (a server
// outside a cluster advertises none), so the client port is published
// under any number.
func startNATS(ctx context.Context, image string, opts []testcontainers.ContainerCustomizer) (*testenv.Server, error) {
	ready := wait.ForNop(func(ctx context.Context, target wait.StrategyTarget) error {
		return poll(ctx, target, func() error {
			addr, err := endpoint(ctx, target, "4222/tcp")
			if err != nil {
				return err
			}
			_, err = natsGreeting(ctx, addr)
			return err
		})
	})
	c, err := testcontainers.Run(ctx, image, append(opts,
		testcontainers.WithCmd("-js"),
		testcontainers.WithExposedPorts("4222/tcp"),
		testcontainers.WithWaitStrategyAndDeadline(startTimeout, ready))...)
	if err != nil {
		return nil, errors.Join(err, terminate(c)())
	}
	addr, err := endpoint(ctx, c, "4222/tcp")
	if err != nil {
		return nil, errors.Join(err, terminate(c)())
	}
	version, err := natsGreeting(ctx, addr)
	if err != nil {
		return nil, errors.Join(err, terminate(c)())
	}
	url := "nats://" + addr
	return testenv.NewServer("nats", url, "nats-server v"+version,
		map[string]string{"IDEMQ_NATS_URL": url}, 0, terminate(c)), nil
}

// natsGreeting reads the INFO line the server at addr greets a client
// with, and returns the server's version if JetStream is enabled.
func natsGreeting(ctx context.Context, addr string) (string, error) {
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("nats greeting: %w", err)
	}
	var info struct {
		Version   string `json:"version"`
		JetStream bool   `json:"jetstream"`
	}
	body, ok := strings.CutPrefix(strings.TrimSpace(line), "INFO ")
	if !ok || json.Unmarshal([]byte(body), &info) != nil {
		return "", fmt.Errorf("nats greeting: not an INFO line: %q", line)
	}
	if !info.JetStream {
		return "", fmt.Errorf("nats greeting without JetStream: %q", line)
	}
	return info.Version, nil
}
