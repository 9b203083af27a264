package redisidgen_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/idgen/redisidgen"
	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/idgen/segment/segmenttest"
	"github.com/idemq/idemq/internal/testenv"
)

func newSegments(t testing.TB, c redis.UniversalClient, namespace string) segment.Store {
	t.Helper()
	s, err := redisidgen.NewSegments(c, namespace)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSegmentConformance(t *testing.T) {
	addr := testenv.Redis(t)
	segmenttest.Run(t, func(t *testing.T) segment.Store {
		// A client each, as another host would have.
		return newSegments(t, newClient(t, addr), "segmenttest")
	}, redisidgen.MaxSegmentValue)
}

// The tag's hash holds Leaf's columns, readable with redis-cli, under the
// key the package documents.
func TestSegmentKeys(t *testing.T) {
	c := newClient(t, testenv.Redis(t))
	ctx := t.Context()
	s := newSegments(t, c, "a:b{c}")
	tag := fmt.Sprintf("orders:%s{x}", strings.ToLower(t.Name()))
	if got, want := redisidgen.SegmentKey(s, tag), "{a%3Ab%7Bc%7D:orders%3A"+strings.ToLower(t.Name())+"%7Bx%7D}:segment"; got != want {
		t.Fatalf("Key = %q, want %q", got, want)
	}
	if got, want := redisidgen.IndexKey(s), "{a%3Ab%7Bc%7D}:segment-tags"; got != want {
		t.Fatalf("IndexKey = %q, want %q", got, want)
	}
	c.Del(ctx, redisidgen.SegmentKey(s, tag))
	if err := s.CreateTag(ctx, segment.Tag{Tag: tag, MaxID: 100, Step: 10, Max: 1000, Description: "orders"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.NextSegment(ctx, tag, 0); err != nil {
		t.Fatal(err)
	}
	h, err := c.HGetAll(ctx, redisidgen.SegmentKey(s, tag)).Result()
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"max_id": "110", "step": "10", "max_limit": "1000", "description": "orders"} {
		if h[k] != v {
			t.Fatalf("hash %v: field %s = %q, want %q", h, k, h[k], v)
		}
	}
	if h["update_time"] == "" {
		t.Fatalf("hash %v has no update_time", h)
	}
	if ok, err := c.SIsMember(ctx, redisidgen.IndexKey(s), tag).Result(); err != nil || !ok {
		t.Fatalf("tag in the index: %v, %v", ok, err)
	}
}

// countHook counts the commands a client sends, by name.
type countHook struct {
	mu    sync.Mutex
	names []string
}

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		h.names = append(h.names, cmd.Name())
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// take returns the commands sent since the last take.
func (h *countHook) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	names := h.names
	h.names = nil
	return names
}

// A segment is one EVALSHA, once Redis has the script; so is a segment that
// fails.
func TestSegmentRoundTrips(t *testing.T) {
	c := newClient(t, testenv.Redis(t))
	hook := &countHook{}
	c.AddHook(hook)
	ctx := t.Context()
	s := newSegments(t, c, "roundtrips")
	tag := strings.ToLower(t.Name()) + "-" + strings.ToLower(rand.Text()[:8])
	if err := s.CreateTag(ctx, segment.Tag{Tag: tag, Step: 10, Max: 100}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.NextSegment(ctx, tag, 0); err != nil { // loads the script if need be
		t.Fatal(err)
	}
	hook.take()
	for _, c := range []struct {
		step, start, end int64
		err              error
	}{{0, 10, 20, nil}, {7, 20, 27, nil}, {500, 27, 100, nil}, {0, 0, 0, segment.ErrMaxReached}} {
		seg, err := s.NextSegment(ctx, tag, c.step)
		if !errors.Is(err, c.err) || seg.Start != c.start || seg.End != c.end {
			t.Fatalf("NextSegment(%d) = %+v, %v; want [%d, %d), %v", c.step, seg, err, c.start, c.end, c.err)
		}
		if got := hook.take(); !slices.Equal(got, []string{"evalsha"}) {
			t.Fatalf("NextSegment(%d) sent %v, want one evalsha", c.step, got)
		}
	}
}

// A reply lost after Redis reserved a segment: go-redis sends the script
// again and gets the next segment. The lost one is never handed out: it
// costs its IDs, never uniqueness.
func TestSegmentDroppedReply(t *testing.T) {
	p := testenv.StartDropProxy(t, testenv.Redis(t))
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: 3})
	t.Cleanup(func() { c.Close() })
	ctx := t.Context()
	s := newSegments(t, c, "dropped")
	tag := "dropped-" + strings.ToLower(rand.Text()[:8])
	if err := s.CreateTag(ctx, segment.Tag{Tag: tag, Step: 10}); err != nil {
		t.Fatal(err)
	}
	// The first run loads the script: a NOSCRIPT reply lost instead
	// would prove nothing.
	if _, err := s.NextSegment(ctx, tag, 0); err != nil {
		t.Fatal(err)
	}
	p.Arm("evalsha")
	seg, err := s.NextSegment(ctx, tag, 0)
	if err != nil || seg.Start != 20 || seg.End != 30 {
		t.Fatalf("NextSegment after a lost reply = %+v, %v; want [20, 30), [10, 20) lost", seg, err)
	}
	if p.Dropped() != 1 {
		t.Fatalf("the proxy dropped %d replies, want 1", p.Dropped())
	}
	if got, err := s.Tag(ctx, tag); err != nil || got.MaxID != 30 {
		t.Fatalf("Tag = %+v, %v; want MaxID 30", got, err)
	}
}
