// Package memidgen is an in-memory [idgen.Leaser]: a pool of node ids for the
// generators of one process, for tests and for programs that run several
// generators side by side. It passes the same conformance suite as the Redis
// and SQL leasers ([github.com/idemq/idemq/idgen/leasetest]); its clock is
// the process's. [Segments] is, in the same way, an in-memory
// [segment.Store] for segment allocators. Generators and allocators in
// different processes need a shared store:
// [github.com/idemq/idemq/idgen/redisidgen] or
// [github.com/idemq/idemq/idgen/sqlidgen].
//
// [New] takes a [Config] whose Size is required; its Lease has a default.
// [NewSegments] has no settings.
package memidgen

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/idemq/idemq/idgen"
)

// Config configures a Leaser.
type Config struct {
	// Size is the number of node ids in the pool, 0 to Size-1. Required.
	Size int64
	// Lease is how long a lease lasts without renewal. Default 10s.
	Lease time.Duration
}

// DefaultLease is the default Config.Lease.
const DefaultLease = 10 * time.Second

// Leaser is a pool of node ids in memory. It is safe for concurrent use.
type Leaser struct {
	mu     sync.Mutex
	size   int64
	ttl    time.Duration
	next   int64          // never-used ids start here, but for those in static
	static map[int64]bool // never-used ids taken by static requests
	free   []int64        // freed ids, longest free first
	leases map[int64]lease
	marks  map[int64]time.Time
}

type lease struct {
	token, owner string
	until        time.Time
}

var _ idgen.Leaser = (*Leaser)(nil)

// New returns an empty pool. Errors wrap [idgen.ErrInvalidConfig].
func New(cfg Config) (*Leaser, error) {
	if cfg.Lease == 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Size <= 0 || cfg.Lease < 0 {
		return nil, fmt.Errorf("memidgen: Size %d and Lease %v must be positive: %w", cfg.Size, cfg.Lease, idgen.ErrInvalidConfig)
	}
	return &Leaser{size: cfg.Size, ttl: cfg.Lease, static: map[int64]bool{}, leases: map[int64]lease{}, marks: map[int64]time.Time{}}, nil
}

// expire moves ended leases to the free queue in the order they ended.
// Called with mu held.
func (m *Leaser) expire(now time.Time) {
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

// Acquire implements [idgen.Leaser].
func (m *Leaser) Acquire(ctx context.Context, req idgen.LeaseRequest) (idgen.Lease, error) {
	if err := ctx.Err(); err != nil {
		return idgen.Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.size-1 > req.MaxNode {
		return idgen.Lease{}, fmt.Errorf("memidgen: a pool of %d node ids, the layout holds %d: %w", m.size, req.MaxNode+1, idgen.ErrInvalidConfig)
	}
	if req.Static && (req.Node < 0 || req.Node >= m.size) {
		return idgen.Lease{}, fmt.Errorf("memidgen: node %d outside the pool of %d: %w", req.Node, m.size, idgen.ErrInvalidConfig)
	}
	now := time.Now()
	m.expire(now)
	node := int64(-1)
	switch {
	case req.Static:
		if _, held := m.leases[req.Node]; held {
			return idgen.Lease{}, fmt.Errorf("memidgen: node %d: %w", req.Node, idgen.ErrNoFreeNode)
		}
		node = req.Node
		m.free = slices.DeleteFunc(m.free, func(n int64) bool { return n == node })
		if node >= m.next {
			m.static[node] = true
		}
	default:
		for ; m.next < m.size && node < 0; m.next++ {
			if !m.static[m.next] {
				node = m.next
			}
		}
		if node < 0 && len(m.free) > 0 {
			node, m.free = m.free[0], m.free[1:]
		}
		if node < 0 {
			return idgen.Lease{}, fmt.Errorf("memidgen: all %d node ids held: %w", m.size, idgen.ErrNoFreeNode)
		}
	}
	tok := rand.Text()
	m.leases[node] = lease{token: tok, owner: req.Owner, until: now.Add(m.ttl)}
	return idgen.Lease{Node: node, Token: tok, TTL: m.ttl, HighWater: m.marks[node]}, nil
}

// holds checks that l is live. Called with mu held.
func (m *Leaser) holds(ctx context.Context, l idgen.Lease) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cur, ok := m.leases[l.Node]
	if !ok || cur.token != l.Token || !time.Now().Before(cur.until) {
		return fmt.Errorf("memidgen: node %d: %w", l.Node, idgen.ErrLeaseLost)
	}
	return nil
}

// Renew implements [idgen.Leaser].
func (m *Leaser) Renew(ctx context.Context, l idgen.Lease, mark time.Time) (idgen.Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.holds(ctx, l); err != nil {
		return idgen.Lease{}, err
	}
	if mark.After(m.marks[l.Node]) {
		m.marks[l.Node] = mark
	}
	cur := m.leases[l.Node]
	cur.until = time.Now().Add(m.ttl)
	m.leases[l.Node] = cur
	l.TTL, l.HighWater = m.ttl, m.marks[l.Node]
	return l, nil
}

// Release implements [idgen.Leaser].
func (m *Leaser) Release(ctx context.Context, l idgen.Lease, mark time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.holds(ctx, l); err != nil {
		return err
	}
	if !mark.IsZero() {
		m.marks[l.Node] = mark
	}
	m.expire(time.Now())
	delete(m.leases, l.Node)
	m.free = append(m.free, l.Node)
	return nil
}

// Owner returns who holds node, or "" if nobody does.
func (m *Leaser) Owner(node int64) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expire(time.Now())
	return m.leases[node].owner
}
