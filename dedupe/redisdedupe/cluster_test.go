package redisdedupe_test

import (
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/dedupetest"
	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/internal/testenv"
)

// TestCluster runs the store on a Redis Cluster: one node that owns every
// slot, which is enough for Redis to refuse a script whose keys span slots.
func TestCluster(t *testing.T) {
	addr := startClusterNode(t)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}})
	t.Cleanup(func() { cc.Close() })
	ctx := t.Context()

	s, err := redisdedupe.New(cc, redisdedupe.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// The node does check slots: one script over two groups' keys fails.
	a, b := s.Key(dedupe.Ref{Group: "a", Key: "k"}), s.Key(dedupe.Ref{Group: "b", Key: "k"})
	if slot(a) == slot(b) {
		t.Fatalf("groups a and b share slot %d; pick others", slot(a))
	}
	if err := cc.Eval(ctx, "return 1", []string{a, b}).Err(); err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("EVAL over two slots = %v, want CROSSSLOT", err)
	}

	t.Run("Conformance", func(t *testing.T) {
		dedupetest.Run(t, func(*testing.T) dedupe.Store { return s }, dedupetest.Features{Batcher: true})
	})
	t.Run("BatchAcrossGroups", func(t *testing.T) {
		var reqs []dedupe.ClaimRequest
		for i := range 30 {
			g := fmt.Sprint("group", i%5)
			reqs = append(reqs, dedupe.ClaimRequest{Ref: dedupe.Ref{Namespace: t.Name(), Group: g, Key: fmt.Sprint(i)}, Lease: time.Minute})
		}
		res, errs, err := s.ClaimBatch(ctx, reqs)
		if err != nil {
			t.Fatal(err)
		}
		var ts []dedupe.Ticket
		for i, r := range res {
			if r.Status != dedupe.Acquired || errs[i] != nil {
				t.Fatalf("item %d = %v, %v; want acquired", i, r.Status, errs[i])
			}
			ts = append(ts, dedupe.Ticket{Ref: reqs[i].Ref, Token: r.Token})
		}
		cerrs, err := s.CompleteBatch(ctx, ts, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		res, _, err = s.ClaimBatch(ctx, reqs)
		if err != nil {
			t.Fatal(err)
		}
		for i := range reqs {
			if cerrs[i] != nil || res[i].Status != dedupe.Done {
				t.Errorf("item %d: complete %v, then claim %v; want done", i, cerrs[i], res[i].Status)
			}
		}
	})
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
