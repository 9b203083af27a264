package testenv

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// RedisClusterNode starts a cluster-enabled redis-server of tb's own on a
// free loopback port, hands it every slot and returns its address: a Redis
// Cluster of one node, which is enough for Redis to refuse a script whose
// keys span slots. It stops when tb ends. A missing redis-server skips tb,
// or fails it under CI=true (see [Missing]).
func RedisClusterNode(tb testing.TB) string {
	tb.Helper()
	bin, err := findBinary(nil, "redis-server")
	if err != nil {
		Missing(tb, fmt.Sprintf("redis cluster: %v (Debian package redis-server)", err))
		return ""
	}
	port, err := freeClusterPort()
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	p, err := launchRedis(ctx, io.Discard, bin, dir, port,
		"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"))
	if err != nil {
		tb.Fatalf("redis cluster node: %v", err)
	}
	tb.Cleanup(func() {
		if err := p.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "testenv: stop redis cluster node:", err)
		}
	})
	addr := hostPort(port)
	if _, err := redisCommand(addr, "CLUSTER ADDSLOTSRANGE 0 16383"); err != nil {
		tb.Fatalf("redis cluster node at %s: %v", addr, err)
	}
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		info, err := redisCommand(addr, "CLUSTER INFO")
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return addr
		}
		if time.Now().After(end) {
			tb.Fatalf("redis cluster node at %s: no cluster_state:ok after 10s (%v)", addr, err)
		}
	}
}

// freeClusterPort returns a free loopback port whose cluster bus port (ten
// thousand higher) is free too.
func freeClusterPort() (int, error) {
	for range 20 {
		port, err := freePort()
		if err != nil {
			return 0, err
		}
		if port+10000 > 65535 {
			continue
		}
		if bus, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000))); err == nil {
			bus.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port pair for a redis cluster node")
}
