package redisidgen_test

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/idgen/leasetest"
	"github.com/idemq/idemq/idgen/redisidgen"
	"github.com/idemq/idemq/internal/testenv"
)

// TestCluster runs the leaser on a Redis Cluster: one node that owns every
// slot, which is enough for Redis to refuse a script whose keys span slots.
func TestCluster(t *testing.T) {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{testenv.RedisClusterNode(t)}})
	t.Cleanup(func() { cc.Close() })
	ctx := t.Context()
	slot := func(key string) int64 { return cc.ClusterKeySlot(ctx, key).Val() }
	a := newLeaser(t, cc, redisidgen.Config{Pool: "a", Size: 1})
	b := newLeaser(t, cc, redisidgen.Config{Pool: "b", Size: 1})
	for _, k := range redisidgen.PoolKeys(a) {
		if slot(k) != slot(redisidgen.PoolKeys(a)[0]) {
			t.Fatalf("key %s in slot %d, the pool's meta key in %d", k, slot(k), slot(redisidgen.PoolKeys(a)[0]))
		}
	}
	// The node does check slots: one script over two pools' keys fails.
	keys := []string{redisidgen.PoolKeys(a)[0], redisidgen.PoolKeys(b)[0]}
	if slot(keys[0]) == slot(keys[1]) {
		t.Fatalf("pools a and b share slot %d; pick others", slot(keys[0]))
	}
	if err := cc.Eval(ctx, "return 1", keys).Err(); err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("EVAL over two slots = %v, want CROSSSLOT", err)
	}
	leasetest.Run(t, conformance(cc), owner)
}
