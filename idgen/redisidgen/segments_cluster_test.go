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
	s := newSegments(t, cc, redisidgen.SegmentsConfig{Namespace: "cluster"})
	ctx := t.Context()
	slot := func(key string) int64 { return cc.ClusterKeySlot(ctx, key).Val() }
	if slot(s.Key("a")) == slot(s.Key("b")) || slot(s.Key("a")) == slot(s.IndexKey()) {
		t.Fatalf("tags a and b and the index share slots %d, %d, %d; pick others", slot(s.Key("a")), slot(s.Key("b")), slot(s.IndexKey()))
	}
	segmenttest.Run(t, func(t *testing.T) segment.Store {
		return newSegments(t, newCluster(t), redisidgen.SegmentsConfig{Namespace: "cluster"})
	}, redisidgen.MaxSegmentValue)
}
