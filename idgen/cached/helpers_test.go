package cached_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/internal/memidgen"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// t0 is a tick boundary of every layout the tests use, well inside their
// lives.
var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// benchLayout has 20 sequence bits, so that the cost of issuing an ID, not
// the sequence, limits the rate.
var benchLayout = idgen.Layout{
	Name: "wide", TimeBits: 41, WorkerBits: 2, SequenceBits: 20,
	Unit: time.Millisecond, Epoch: idgen.Twitter.Epoch,
}

// markLeaser is a memidgen pool that remembers the last high-water mark
// written per node: what the next holder of the node starts after.
type markLeaser struct {
	*memidgen.Leaser
	mu    sync.Mutex
	marks map[int64]time.Time
}

func newMarkLeaser(t *testing.T, size int64, lease time.Duration) *markLeaser {
	t.Helper()
	l, err := memidgen.New(memidgen.Config{Size: size, Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	return &markLeaser{Leaser: l, marks: map[int64]time.Time{}}
}

func (m *markLeaser) Renew(ctx context.Context, l idgen.Lease, mark time.Time) (idgen.Lease, error) {
	renewed, err := m.Leaser.Renew(ctx, l, mark)
	if err == nil {
		m.mu.Lock()
		m.marks[l.Node] = renewed.HighWater
		m.mu.Unlock()
	}
	return renewed, err
}

func (m *markLeaser) Release(ctx context.Context, l idgen.Lease, mark time.Time) error {
	err := m.Leaser.Release(ctx, l, mark)
	if err == nil && !mark.IsZero() {
		m.mu.Lock()
		m.marks[l.Node] = mark
		m.mu.Unlock()
	}
	return err
}

// mark returns the node's mark as last written.
func (m *markLeaser) mark(node int64) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.marks[node]
}
