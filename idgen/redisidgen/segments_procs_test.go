package redisidgen_test

import (
	"crypto/rand"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/idgen/redisidgen"
	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/idgen/segment/segmenttest"
	"github.com/idemq/idemq/internal/testenv"
)

func init() {
	if segmenttest.IsChild() {
		os.Exit(segmenttest.Child(newChildSegments))
	}
}

// newChildSegments is a child's source over the Redis at REDIS.
func newChildSegments(getenv func(string) string) (segment.Source, func(), error) {
	client := redis.NewClient(&redis.Options{Addr: getenv("REDIS")})
	s, err := redisidgen.NewSegments(client, redisidgen.SegmentsConfig{Namespace: "procs"})
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
	s := newSegments(t, newClient(t, addr), redisidgen.SegmentsConfig{Namespace: "procs"})
	tag := "procs-" + strings.ToLower(rand.Text()[:8])
	const start = 1_000_000
	if err := s.CreateTag(t.Context(), segment.Tag{Tag: tag, MaxID: start, Step: 10}); err != nil {
		t.Fatal(err)
	}
	r := segmenttest.RunProcesses(t, tag, segmenttest.Processes{Env: map[string]string{"REDIS": addr}})
	got, err := s.Tag(t.Context(), tag)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d IDs from %d processes (%v), %d distinct, %d duplicates, in [%d, %d]; segments per process %v; the tag's MaxID is %d",
		r.IDs, len(r.PerProcess), r.PerProcess, r.Distinct, r.IDs-r.Distinct, r.Min, r.Max, r.Segments, got.MaxID)
	if r.Distinct != r.IDs {
		t.Fatalf("%d of %d IDs were written twice", r.IDs-r.Distinct, r.IDs)
	}
	if r.IDs != 8*20000 {
		t.Fatalf("%d IDs written, want %d", r.IDs, 8*20000)
	}
	if r.Min < start || r.Max >= got.MaxID {
		t.Fatalf("IDs in [%d, %d], outside the tag's [%d, %d)", r.Min, r.Max, start, got.MaxID)
	}
}
