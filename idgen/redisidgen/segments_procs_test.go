package redisidgen_test

import (
	"crypto/rand"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/idgen/redisidgen"
	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/internal/fleettest"
	"github.com/idemq/idemq/internal/testenv"
)

// newChildSegments is a child's source over the Redis at REDIS.
func newChildSegments(env map[string]string) (segment.Store, func(), error) {
	client := redis.NewClient(&redis.Options{Addr: env["REDIS"]})
	s, err := redisidgen.NewSegments(client, "procs")
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	return s, func() { client.Close() }, nil
}

// Eight processes take IDs of one tag through segment allocators over one
// Redis, with a step of 10 so that they switch segments often: no ID is
// written twice, and every one lies between the tag's start and its MaxID.
func TestSegmentProcesses(t *testing.T) {
	addr := testenv.Redis(t)
	s := newSegments(t, newClient(t, addr), "procs")
	tag := "procs-" + strings.ToLower(rand.Text()[:8])
	fleettest.SegmentProcesses(t, s, tag, map[string]string{"REDIS": addr})
}
