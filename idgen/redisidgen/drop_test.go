package redisidgen_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/redisidgen"
	"github.com/idemq/idemq/internal/testenv"
)

// TestDroppedReply loses the reply to each call once, after Redis ran the
// script; go-redis sends the call again on a new connection.
func TestDroppedReply(t *testing.T) {
	addr := testenv.Redis(t)
	p := testenv.StartDropProxy(t, addr)
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: 3})
	t.Cleanup(func() { c.Close() })
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		// run makes the call whose reply is lost, on a pool where l holds
		// lease; check inspects the pool after.
		run func(t *testing.T, l *redisidgen.Leaser, lease idgen.Lease)
	}{
		{"Acquire", func(t *testing.T, l *redisidgen.Leaser, held idgen.Lease) {
			got, err := l.Acquire(ctx, idgen.LeaseRequest{MaxNode: 3, Owner: "retried"})
			if err != nil {
				t.Fatalf("Acquire = %v", err)
			}
			// The retry found the lease its token was granted: one node
			// taken, and the token renews it.
			wantNodes(t, l, held.Node, got.Node)
			if _, err := l.Renew(ctx, got, time.Time{}); err != nil {
				t.Fatalf("Renew of the retried Acquire's lease = %v", err)
			}
			next, err := l.Acquire(ctx, idgen.LeaseRequest{MaxNode: 3})
			if err != nil || next.Node != got.Node+1 {
				t.Fatalf("next Acquire = node %d, %v; want node %d", next.Node, err, got.Node+1)
			}
		}},
		{"StaticAcquire", func(t *testing.T, l *redisidgen.Leaser, held idgen.Lease) {
			got, err := l.Acquire(ctx, idgen.LeaseRequest{MaxNode: 3, Static: true, Node: 2})
			if err != nil || got.Node != 2 {
				t.Fatalf("static Acquire = node %d, %v; want node 2", got.Node, err)
			}
			wantNodes(t, l, held.Node, 2)
		}},
		{"Renew", func(t *testing.T, l *redisidgen.Leaser, held idgen.Lease) {
			mark := time.UnixMilli(1_700_000_000_000).UTC()
			got, err := l.Renew(ctx, held, mark)
			if err != nil || !got.HighWater.Equal(mark) {
				t.Fatalf("Renew = %v, %v; want the mark %v", got.HighWater, err, mark)
			}
		}},
		{"Release", func(t *testing.T, l *redisidgen.Leaser, held idgen.Lease) {
			// The first run released the node; the retry reports it lost,
			// as the package documents.
			if err := l.Release(ctx, held, time.Time{}); !errors.Is(err, idgen.ErrLeaseLost) {
				t.Fatalf("Release = %v, want ErrLeaseLost from the retry", err)
			}
			wantNodes(t, l)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLeaser(t, c, redisidgen.Config{Pool: poolName(t), Size: 4, Lease: time.Minute})
			if err := l.Create(ctx); err != nil {
				t.Fatal(err)
			}
			held, err := l.Acquire(ctx, idgen.LeaseRequest{MaxNode: 3, Owner: "held"})
			if err != nil {
				t.Fatal(err)
			}
			// A NOSCRIPT reply lost instead would prove nothing.
			loadScripts(t, c)
			before := p.Dropped()
			p.Arm("evalsha")
			tc.run(t, l, held)
			if p.Dropped() != before+1 {
				t.Fatalf("the proxy dropped %d replies, want 1", p.Dropped()-before)
			}
		})
	}
}

// loadScripts runs every script once in a pool of its own.
func loadScripts(t *testing.T, c redis.UniversalClient) {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	l := newLeaser(t, c, redisidgen.Config{Pool: poolName(t) + "-load", Size: 1, Lease: time.Minute})
	if err := l.Create(ctx); err != nil {
		t.Fatal(err)
	}
	lease, err := l.Acquire(ctx, idgen.LeaseRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if lease, err = l.Renew(ctx, lease, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx, lease, time.Time{}); err != nil {
		t.Fatal(err)
	}
}

// wantNodes checks that exactly nodes are held in l's pool.
func wantNodes(t *testing.T, l *redisidgen.Leaser, nodes ...int64) {
	t.Helper()
	infos, err := l.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, li := range infos {
		got = append(got, li.Node)
	}
	if !slices.Equal(got, nodes) {
		t.Fatalf("held nodes %v, want %v", got, nodes)
	}
}
