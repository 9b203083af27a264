package redisidgen_test

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/idgen/leasetest"
	"github.com/idemq/idemq/idgen/redisidgen"
	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/idgen/segment/segmenttest"
	"github.com/idemq/idemq/internal/testenv"
)

// TestCluster runs the leaser and the segment source on a Redis Cluster:
// one node that owns every slot, which is enough for Redis to refuse a
// script whose keys span slots. A pool's keys share a slot; each tag's hash
// and the index live in slots of their own.
func TestCluster(t *testing.T) {
	addr := testenv.RedisClusterNode(t)
	newCluster := func(t *testing.T) *redis.ClusterClient {
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}})
		t.Cleanup(func() { cc.Close() })
		return cc
	}
	cc := newCluster(t)
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
	s := newSegments(t, cc, "cluster")
	if slot(redisidgen.SegmentKey(s, "a")) == slot(redisidgen.SegmentKey(s, "b")) || slot(redisidgen.SegmentKey(s, "a")) == slot(redisidgen.IndexKey(s)) {
		t.Fatalf("tags a and b and the index share slots %d, %d, %d; pick others", slot(redisidgen.SegmentKey(s, "a")), slot(redisidgen.SegmentKey(s, "b")), slot(redisidgen.IndexKey(s)))
	}
	t.Run("Leaser", func(t *testing.T) { leasetest.Run(t, conformance(cc), owner) })
	t.Run("Segments", func(t *testing.T) {
		segmenttest.Run(t, func(t *testing.T) segment.Store {
			return newSegments(t, newCluster(t), "cluster")
		}, redisidgen.MaxSegmentValue)
	})
}
