package redisidgen_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/idgen/redisidgen"
	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/idgen/segment/segmenttest"
	"github.com/idemq/idemq/internal/testenv"
)

// TestSegmentCluster runs the segment source on a Redis Cluster node, which
// refuses a script whose keys span slots: each tag's hash and the index
// live in slots of their own.
func TestSegmentCluster(t *testing.T) {
	addr := testenv.RedisClusterNode(t)
	newCluster := func(t *testing.T) *redis.ClusterClient {
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}})
		t.Cleanup(func() { cc.Close() })
		return cc
	}
	cc := newCluster(t)
	s := newSegments(t, cc, "cluster")
	ctx := t.Context()
	slot := func(key string) int64 { return cc.ClusterKeySlot(ctx, key).Val() }
	if slot(redisidgen.SegmentKey(s, "a")) == slot(redisidgen.SegmentKey(s, "b")) || slot(redisidgen.SegmentKey(s, "a")) == slot(redisidgen.IndexKey(s)) {
		t.Fatalf("tags a and b and the index share slots %d, %d, %d; pick others", slot(redisidgen.SegmentKey(s, "a")), slot(redisidgen.SegmentKey(s, "b")), slot(redisidgen.IndexKey(s)))
	}
	segmenttest.Run(t, func(t *testing.T) segment.Store {
		return newSegments(t, newCluster(t), "cluster")
	}, redisidgen.MaxSegmentValue)
}
