package redisidgen_test

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/internal/testenv"
)

// TestAllocatorOutlivesOutage: Redis goes down while the allocator's
// segment has room. Every ID it holds is still issued, the failed loads show
// in its Stats, and only then does Next fail, with the connection's error
// rather than a verdict about the tag. (Recovery once the source answers
// again is idgen's and idhttp's TestSourceDown, behind a fault injector.)
func TestAllocatorOutlivesOutage(t *testing.T) {
	r := testenv.StartPrivateRedis(t)
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { c.Close() })
	src := newSegments(t, c, "")
	ctx := t.Context()
	const step = 10
	if err := src.CreateTag(ctx, segment.Tag{Tag: "orders", MaxID: 1000, Step: step}); err != nil {
		t.Fatal(err)
	}
	a, err := segment.New(ctx, src, "orders", segment.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	seen := map[int64]bool{}
	take := func() error {
		id, err := a.Next(ctx)
		if err == nil {
			if seen[id] {
				t.Fatalf("ID %d issued twice", id)
			}
			seen[id] = true
		}
		return err
	}
	// The first ID comes before the preload mark (a tenth of the
	// segment), so the next segment is loaded only once Redis is down.
	if err := take(); err != nil {
		t.Fatal(err)
	}
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	for err = take(); err == nil; err = take() {
	}
	if len(seen) != step {
		t.Errorf("issued %d IDs before failing, want the whole segment of %d", len(seen), step)
	}
	for _, verdict := range []error{segment.ErrUnknownTag, segment.ErrMaxReached, idgen.ErrClosed} {
		if errors.Is(err, verdict) {
			t.Fatalf("Next with Redis down = %v: a verdict about the tag, not an outage", err)
		}
	}
	if st := a.Stats(); st.LoadFailures == 0 || !st.Failing || st.LastError == nil {
		t.Fatalf("Stats with Redis down = %+v, want the failed loads", st)
	}
	t.Logf("Redis down: %d IDs issued from the segment in hand, then %v", len(seen), err)
}
