package idgen_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/internal/memidgen"
)

// faultLeaser wraps a memidgen pool to record what generators write and to
// inject faults.
type faultLeaser struct {
	inner    *memidgen.Leaser
	mu       sync.Mutex
	forever  bool             // grant leases that never end (TTL 0)
	failing  error            // Renew forwards, then fails with it: a lost reply
	refusing error            // Acquire fails with it
	during   func()           // Acquire calls it first: a slow round trip
	stolen   map[string]bool  // tokens whose node someone else took
	lose     int              // grants to steal at once: their holder stalled
	tokens   map[int64]string // the latest token granted per node
	renewals int
	marks    map[int64]time.Time // the last mark written per node
	released map[int64]time.Time // the mark of each node's last release
}

var _ idgen.Leaser = (*faultLeaser)(nil)

func newFaultLeaser(t *testing.T, size int64, ttl time.Duration) *faultLeaser {
	t.Helper()
	inner, err := memidgen.New(memidgen.Config{Size: size, Lease: max(ttl, time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	return &faultLeaser{inner: inner, forever: ttl == 0, stolen: map[string]bool{}, tokens: map[int64]string{}, marks: map[int64]time.Time{}, released: map[int64]time.Time{}}
}

func (f *faultLeaser) Acquire(ctx context.Context, req idgen.LeaseRequest) (idgen.Lease, error) {
	f.mu.Lock()
	during, refusing := f.during, f.refusing
	f.mu.Unlock()
	if during != nil {
		during()
	}
	if refusing != nil {
		return idgen.Lease{}, refusing
	}
	l, err := f.inner.Acquire(ctx, req)
	if err != nil {
		return l, err
	}
	if f.forever {
		l.TTL = 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tokens[l.Node] = l.Token
	if f.lose > 0 {
		f.lose--
		f.stolen[l.Token] = true
	}
	return l, nil
}

func (f *faultLeaser) Renew(ctx context.Context, l idgen.Lease, mark time.Time) (idgen.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.renewals++
	if f.stolen[l.Token] {
		return idgen.Lease{}, fmt.Errorf("fault: node %d taken over: %w", l.Node, idgen.ErrLeaseLost)
	}
	renewed, err := f.inner.Renew(ctx, l, mark)
	if err == nil && mark.After(f.marks[l.Node]) {
		f.marks[l.Node] = mark
	}
	if f.failing != nil {
		return idgen.Lease{}, f.failing
	}
	return renewed, err
}

func (f *faultLeaser) Release(ctx context.Context, l idgen.Lease, mark time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stolen[l.Token] {
		return fmt.Errorf("fault: node %d taken over: %w", l.Node, idgen.ErrLeaseLost)
	}
	err := f.inner.Release(ctx, l, mark)
	if err == nil {
		f.marks[l.Node], f.released[l.Node] = mark, mark
	}
	return err
}

// preset leaves node with mark, as an earlier holder would.
func (f *faultLeaser) preset(t *testing.T, node int64, mark time.Time) {
	t.Helper()
	ctx := context.Background()
	l, err := f.inner.Acquire(ctx, idgen.LeaseRequest{MaxNode: 1 << 20, Static: true, Node: node})
	if err == nil {
		err = f.inner.Release(ctx, l, mark)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// steal makes node's current lease lost, as when its holder stalled past
// the lease and someone else took the node.
func (f *faultLeaser) steal(node int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stolen[f.tokens[node]] = true
}

// loseGrants makes the next n leases granted lost before their holder
// renews them, as when it stalled past the lease between the grant and
// the renewal and someone else took the node.
func (f *faultLeaser) loseGrants(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lose = n
}

// set changes f's faults, under its lock.
func (f *faultLeaser) set(change func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change()
}

func (f *faultLeaser) mark(node int64) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.marks[node]
}

func (f *faultLeaser) releasedMark(node int64) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.released[node]
	return m, ok
}

func (f *faultLeaser) renewCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.renewals
}

// held counts the nodes of a pool of size that have a holder.
func (f *faultLeaser) held(size int64) int {
	n := 0
	for node := range size {
		if f.inner.Owner(node) != "" {
			n++
		}
	}
	return n
}

var errStoreDown = errors.New("fault: store down")
