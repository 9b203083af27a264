package redisidgen_test

import (
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/idgen/leasetest"
	"github.com/idemq/idemq/idgen/redisidgen"
	"github.com/idemq/idemq/internal/testenv"
)

// TestCluster runs the leaser on a Redis Cluster: one node that owns every
// slot, which is enough for Redis to refuse a script whose keys span slots.
func TestCluster(t *testing.T) {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{startClusterNode(t)}})
	t.Cleanup(func() { cc.Close() })
	ctx := t.Context()
	slot := func(key string) int64 { return cc.ClusterKeySlot(ctx, key).Val() }
	a := newLeaser(t, cc, redisidgen.Config{Pool: "a", Size: 1})
	b := newLeaser(t, cc, redisidgen.Config{Pool: "b", Size: 1})
	for _, k := range a.Keys() {
		if slot(k) != slot(a.Keys()[0]) {
			t.Fatalf("key %s in slot %d, the pool's meta key in %d", k, slot(k), slot(a.Keys()[0]))
		}
	}
	// The node does check slots: one script over two pools' keys fails.
	keys := []string{a.Keys()[0], b.Keys()[0]}
	if slot(keys[0]) == slot(keys[1]) {
		t.Fatalf("pools a and b share slot %d; pick others", slot(keys[0]))
	}
	if err := cc.Eval(ctx, "return 1", keys).Err(); err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("EVAL over two slots = %v, want CROSSSLOT", err)
	}
	leasetest.Run(t, conformance(cc), features)
}

// startClusterNode starts a cluster-enabled redis-server on a free loopback
// port, hands it every slot and returns its address. It stops when t ends.
func startClusterNode(t *testing.T) string {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Missing(t, "redis-server is not installed (Debian package redis-server)")
		return ""
	}
	port := freeClusterPort(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir,
		"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
		"--save", "", "--appendonly", "no", "--protected-mode", "no", "--logfile", filepath.Join(dir, "redis.log"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx := t.Context()
	wait := func(what string, ready func() bool) {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); !ready(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("redis cluster node at %s: %s: timed out", addr, what)
			}
		}
	}
	wait("start", func() bool { return c.Ping(ctx).Err() == nil })
	if err := c.ClusterAddSlotsRange(ctx, 0, 16383).Err(); err != nil {
		t.Fatal(err)
	}
	wait("cluster_state:ok", func() bool {
		return strings.Contains(c.ClusterInfo(ctx).Val(), "cluster_state:ok")
	})
	return addr
}

// freeClusterPort returns a free loopback port whose cluster bus port (ten
// thousand higher) is free too.
func freeClusterPort(t *testing.T) int {
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if port+10000 > 65535 {
			continue
		}
		if bus, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000))); err == nil {
			bus.Close()
			return port
		}
	}
	t.Fatal("no free port pair for a cluster node")
	return 0
}
