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
	"strings"
	"testing"
	"time"
)

func init() {
	register(service{name: "redis", env: "IDEMQ_REDIS_ADDR", local: startRedis})
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
// dir, with extra arguments, and waits until it answers.
func launchRedis(ctx context.Context, log io.Writer, bin, dir string, port int, extra ...string) (*process, error) {
	args := append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir,
		"--save", "", "--appendonly", "no", "--protected-mode", "no"}, extra...)
	p, err := startProcess(log, filepath.Join(dir, "redis.log"), nil, bin, args...)
	if err != nil {
		return nil, err
	}
	addr := hostPort(port)
	ping := func(context.Context) error {
		if reply, err := redisCommand(addr, "PING"); err != nil || reply != "PONG" {
			return fmt.Errorf("PING answered %q: %v", reply, err)
		}
		return nil
	}
	if err := waitReady(ctx, p, ping); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// redisCommand sends one inline command and returns its status or bulk
// reply: just enough RESP to set a server up without a client library.
func redisCommand(addr, cmd string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte(cmd + "\r\n")); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	switch {
	case strings.HasPrefix(line, "+"):
		return line[1:], nil
	case strings.HasPrefix(line, "$"):
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("%s answered %q", cmd, line)
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return "", err
		}
		return string(b[:n]), nil
	}
	return "", fmt.Errorf("%s answered %q", cmd, line)
}

var redisVersionRE = regexp.MustCompile(`v=(\S+)`)

func redisVersion(bin string) string {
	out, _ := exec.Command(bin, "--version").Output()
	if m := redisVersionRE.FindSubmatch(out); m != nil {
		return string(m[1])
	}
	return "unknown"
}
