package redisdedupe_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/dedupetest"
	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
)

// TestCluster runs the store on a Redis Cluster: one node that owns every
// slot, which is enough for Redis to refuse a script whose keys span slots.
func TestCluster(t *testing.T) {
	addr := testenv.RedisClusterNode(t)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}})
	t.Cleanup(func() { cc.Close() })
	ctx := t.Context()

	s, err := redisdedupe.New(cc, redisdedupe.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// The node does check slots: one script over two groups' keys fails.
	a, b := redisdedupe.Key(s, dedupe.Ref{Group: "a", Key: "k"}), redisdedupe.Key(s, dedupe.Ref{Group: "b", Key: "k"})
	if slot(a) == slot(b) {
		t.Fatalf("groups a and b share slot %d; pick others", slot(a))
	}
	if err := cc.Eval(ctx, "return 1", []string{a, b}).Err(); err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("EVAL over two slots = %v, want CROSSSLOT", err)
	}

	// The node runs Redis 7, so the store claims by SET: it asked every
	// master for its version.
	watched := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}})
	t.Cleanup(func() { watched.Close() })
	hook := &countHook{}
	watched.AddHook(hook)
	ws, err := redisdedupe.New(watched, redisdedupe.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := testkit.Claim(ctx, ws, dedupe.Item{Ref: dedupe.Ref{Namespace: t.Name(), Group: "g", Key: "k"}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if cmds, _ := hook.take(); !slices.Contains(cmds, "set") || slices.Contains(cmds, "evalsha") {
		t.Errorf("a claim on the cluster sent %q, want a SET", cmds)
	}

	// The suite's batches span groups, and so slots.
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			s, err := redisdedupe.New(cc, redisdedupe.Config{})
			if err != nil {
				t.Fatal(err)
			}
			p.use(s)
			dedupetest.RunConformanceTests(t, func(*testing.T) dedupe.Store { return s }, features)
		})
	}
}
