package testenv

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

func init() {
	register(service{name: "redis", env: "IDEMQ_REDIS_ADDR", local: startRedis, container: redisContainer})
}

// Redis returns the host:port of a real Redis server.
func Redis(tb testing.TB) string {
	tb.Helper()
	return lookup(tb, services["redis"])
}

func startRedis(ctx context.Context, dir string, log io.Writer) (*Server, error) {
	bin, err := findBinary(nil, "redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis: %w (Debian package redis-server)", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p, err := launchRedis(ctx, log, bin, dir, port)
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	return &Server{Name: "redis", Addr: hostPort(port), Version: redisVersion(bin), stop: p.stop}, nil
}

// launchRedis runs bin on port without persistence, its data and log in
// dir, and waits until it answers.
func launchRedis(ctx context.Context, log io.Writer, bin, dir string, port int) (*process, error) {
	p, err := startProcess(log, filepath.Join(dir, "redis.log"), nil, bin,
		"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir,
		"--save", "", "--appendonly", "no", "--protected-mode", "no")
	if err != nil {
		return nil, err
	}
	addr := hostPort(port)
	if err := waitReady(ctx, p, func(context.Context) error { return redisPing(addr) }); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// redisPing speaks just enough RESP to see the server answer.
func redisPing(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

var redisVersionRE = regexp.MustCompile(`v=(\S+)`)

func redisVersion(bin string) string {
	out, _ := exec.Command(bin, "--version").Output()
	if m := redisVersionRE.FindSubmatch(out); m != nil {
		return string(m[1])
	}
	return "unknown"
}
