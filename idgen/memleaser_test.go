package idgen_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/idemq/idemq/idgen"
)

// memLeaser is an in-memory Leaser for the generator's unit tests, with
// faults to inject. Time is the real clock.
type memLeaser struct {
	mu     sync.Mutex
	size   int64
	ttl    time.Duration
	leases map[int64]memLease
	marks  map[int64]time.Time
	free   []int64 // freed nodes, oldest first
	next   int64   // never-used nodes start here

	failRenew error // returned by Renew when set
	renewals  int
	released  map[int64]time.Time // the mark of each node's last release
}

type memLease struct {
	token, owner string
	until        time.Time
}

func newMemLeaser(size int64, ttl time.Duration) *memLeaser {
	return &memLeaser{size: size, ttl: ttl, leases: map[int64]memLease{}, marks: map[int64]time.Time{}, released: map[int64]time.Time{}}
}

var _ idgen.Leaser = (*memLeaser)(nil)

// expire frees the nodes whose lease has ended. Called with mu held.
func (m *memLeaser) expire(now time.Time) {
	for node, l := range m.leases {
		if !now.Before(l.until) {
			delete(m.leases, node)
			m.free = append(m.free, node)
		}
	}
}

func (m *memLeaser) Acquire(ctx context.Context, req idgen.LeaseRequest) (idgen.Lease, error) {
	if err := ctx.Err(); err != nil {
		return idgen.Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.size-1 > req.MaxNode {
		return idgen.Lease{}, fmt.Errorf("mem: pool of %d nodes, layout holds %d: %w", m.size, req.MaxNode+1, idgen.ErrNodeRange)
	}
	now := time.Now()
	m.expire(now)
	node := int64(-1)
	switch {
	case req.Static:
		if _, held := m.leases[req.Node]; held {
			return idgen.Lease{}, fmt.Errorf("mem: node %d: %w", req.Node, idgen.ErrNoFreeNode)
		}
		node = req.Node
		for i, n := range m.free {
			if n == node {
				m.free = append(m.free[:i:i], m.free[i+1:]...)
			}
		}
		m.next = max(m.next, node+1)
	case m.next < m.size:
		node = m.next
		m.next++
	case len(m.free) > 0:
		node, m.free = m.free[0], m.free[1:]
	default:
		return idgen.Lease{}, fmt.Errorf("mem: %w", idgen.ErrNoFreeNode)
	}
	tok := rand.Text()
	m.leases[node] = memLease{token: tok, owner: req.Owner, until: now.Add(m.ttl)}
	return idgen.Lease{Node: node, Token: tok, TTL: m.ttl, HighWater: m.marks[node]}, nil
}

// holds returns the live lease l names. Called with mu held.
func (m *memLeaser) holds(l idgen.Lease) bool {
	cur, ok := m.leases[l.Node]
	return ok && cur.token == l.Token && time.Now().Before(cur.until)
}

func (m *memLeaser) Renew(ctx context.Context, l idgen.Lease, mark time.Time) (idgen.Lease, error) {
	if err := ctx.Err(); err != nil {
		return idgen.Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.renewals++
	if m.failRenew != nil {
		return idgen.Lease{}, m.failRenew
	}
	if !m.holds(l) {
		return idgen.Lease{}, fmt.Errorf("mem: node %d: %w", l.Node, idgen.ErrLeaseLost)
	}
	if mark.After(m.marks[l.Node]) {
		m.marks[l.Node] = mark
	}
	cur := m.leases[l.Node]
	cur.until = time.Now().Add(m.ttl)
	m.leases[l.Node] = cur
	l.HighWater = m.marks[l.Node]
	return l, nil
}

func (m *memLeaser) Release(ctx context.Context, l idgen.Lease, mark time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.holds(l) {
		return fmt.Errorf("mem: node %d: %w", l.Node, idgen.ErrLeaseLost)
	}
	m.marks[l.Node] = mark
	m.released[l.Node] = mark
	delete(m.leases, l.Node)
	m.free = append(m.free, l.Node)
	return nil
}

// steal ends node's lease and gives it to someone else, as a store does
// when the holder stalled past its lease.
func (m *memLeaser) steal(node int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.leases[node] = memLease{token: "thief", until: time.Now().Add(time.Hour)}
}

func (m *memLeaser) setFailRenew(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failRenew = err
}

func (m *memLeaser) mark(node int64) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.marks[node]
}

func (m *memLeaser) renewCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.renewals
}

var errStoreDown = errors.New("mem: store down")
