package leasetest_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/leasetest"
)

// TestReference runs the suite on a small in-memory leaser written to the
// contract, so that a failure of a real backend is the backend's.
func TestReference(t *testing.T) {
	var mu sync.Mutex
	pools := map[string]*memPool{}
	leasetest.Run(t, func(t *testing.T, p leasetest.Pool) idgen.Leaser {
		mu.Lock()
		defer mu.Unlock()
		if pools[p.Name] == nil {
			pools[p.Name] = &memPool{size: p.Size, ttl: p.TTL, leases: map[int64]memLease{}, marks: map[int64]time.Time{}}
		}
		return pools[p.Name]
	}, leasetest.Features{
		Owner: func(_ context.Context, l idgen.Leaser, node int64) (string, error) {
			m := l.(*memPool)
			m.mu.Lock()
			defer m.mu.Unlock()
			m.expire(time.Now())
			return m.leases[node].owner, nil
		},
	})
}

// memPool is one pool in memory; time.Now is its store clock.
type memPool struct {
	mu     sync.Mutex
	size   int64
	ttl    time.Duration
	next   int64 // never-used ids start here, but for those in used
	used   map[int64]bool
	free   []int64
	leases map[int64]memLease
	marks  map[int64]time.Time
}

type memLease struct {
	token, owner string
	until        time.Time
}

// expire moves ended leases to the free queue in the order they ended.
func (m *memPool) expire(now time.Time) {
	var ended []int64
	for n, l := range m.leases {
		if !now.Before(l.until) {
			ended = append(ended, n)
		}
	}
	slices.SortFunc(ended, func(a, b int64) int { return m.leases[a].until.Compare(m.leases[b].until) })
	for _, n := range ended {
		delete(m.leases, n)
		m.free = append(m.free, n)
	}
}

func (m *memPool) Acquire(ctx context.Context, req idgen.LeaseRequest) (idgen.Lease, error) {
	if err := ctx.Err(); err != nil {
		return idgen.Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.size-1 > req.MaxNode || req.Static && (req.Node < 0 || req.Node >= m.size) {
		return idgen.Lease{}, fmt.Errorf("mem: %w", idgen.ErrNodeRange)
	}
	now := time.Now()
	m.expire(now)
	node := int64(-1)
	switch {
	case req.Static:
		if _, held := m.leases[req.Node]; held {
			return idgen.Lease{}, fmt.Errorf("mem: %w", idgen.ErrNoFreeNode)
		}
		node = req.Node
		m.free = slices.DeleteFunc(m.free, func(n int64) bool { return n == node })
		if node >= m.next {
			if m.used == nil {
				m.used = map[int64]bool{}
			}
			m.used[node] = true
		}
	default:
		for ; m.next < m.size && node < 0; m.next++ {
			if !m.used[m.next] {
				node = m.next
			}
		}
		if node < 0 && len(m.free) > 0 {
			node, m.free = m.free[0], m.free[1:]
		}
		if node < 0 {
			return idgen.Lease{}, fmt.Errorf("mem: %w", idgen.ErrNoFreeNode)
		}
	}
	tok := rand.Text()
	m.leases[node] = memLease{token: tok, owner: req.Owner, until: now.Add(m.ttl)}
	return idgen.Lease{Node: node, Token: tok, TTL: m.ttl, HighWater: m.marks[node]}, nil
}

// hold checks that l is live and raises its mark. Called with mu held.
func (m *memPool) hold(ctx context.Context, l idgen.Lease, mark time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cur, ok := m.leases[l.Node]
	if !ok || cur.token != l.Token || !time.Now().Before(cur.until) {
		return fmt.Errorf("mem: %w", idgen.ErrLeaseLost)
	}
	m.marks[l.Node] = maxTime(m.marks[l.Node], mark)
	return nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func (m *memPool) Renew(ctx context.Context, l idgen.Lease, mark time.Time) (idgen.Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.hold(ctx, l, mark); err != nil {
		return idgen.Lease{}, err
	}
	cur := m.leases[l.Node]
	cur.until = time.Now().Add(m.ttl)
	m.leases[l.Node] = cur
	l.TTL, l.HighWater = m.ttl, m.marks[l.Node]
	return l, nil
}

func (m *memPool) Release(ctx context.Context, l idgen.Lease, mark time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.hold(ctx, l, mark); err != nil {
		return err
	}
	m.expire(time.Now())
	delete(m.leases, l.Node)
	m.free = append(m.free, l.Node)
	return nil
}
