package fleettest

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testkit"
)

// Fleet runs leased generators in children of the test binary against one
// pool.
type Fleet struct {
	pool Pool
	env  map[string]string
	dir  string
	n    atomic.Int32
}

// New returns a fleet leasing from a pool of size node ids with leases of
// lease, named after t and unique to the run: test runs that share a server
// (two checkouts, or -count) must not lease from one pool. env holds the
// backend settings every child's [NewLeaser] reads by key.
func New(t *testing.T, size int64, lease time.Duration, env map[string]string) *Fleet {
	t.Helper()
	name := fmt.Sprintf("fleet-%.40s-%s", strings.ReplaceAll(t.Name(), "/", "-"), strings.ToLower(rand.Text()[:8]))
	return &Fleet{
		pool: Pool{Name: name, Size: size, Lease: lease},
		env:  env,
		dir:  t.TempDir(),
	}
}

// Pool returns the fleet's pool.
func (f *Fleet) Pool() Pool { return f.pool }

// Proc is one running child.
type Proc struct {
	*racechild.Proc
	out string
	// Node is the node the child said it holds, -1 until it does.
	Node int64
}

// Start runs a child that issues count IDs (0: until [Proc.Finish]),
// waiting for a free node if wait. The child is killed when t ends.
func (f *Fleet) Start(t *testing.T, count int, wait bool) *Proc {
	t.Helper()
	n := f.n.Add(1)
	out := filepath.Join(f.dir, fmt.Sprintf("ids-%03d", n))
	s := leasedSettings{Pool: f.pool, Count: count, Wait: wait, Out: out, Env: f.env}
	return &Proc{Proc: racechild.Start(t, roleLeased, "child "+strconv.Itoa(int(n)), s), out: out, Node: -1}
}

// Await returns the child's next line, or "" once it exited; after
// "node N" it sets Node. It fails t after timeout.
func (c *Proc) Await(t *testing.T, timeout time.Duration) string {
	t.Helper()
	l, ok := c.Next(t, timeout)
	if !ok {
		return ""
	}
	if n, ok := strings.CutPrefix(l, "node "); ok {
		c.Node, _ = strconv.ParseInt(n, 10, 64)
	}
	return l
}

// AwaitIDs waits until the child has written an ID. Saying "node N" is no
// proof that it issued one: on a loaded machine a child can stall for
// longer than any pause the test would take for granted.
func (c *Proc) AwaitIDs(t *testing.T) {
	t.Helper()
	testkit.WaitFor(t, c.Name()+" to write an ID", func() bool {
		fi, err := os.Stat(c.out)
		return err == nil && fi.Size() >= 8
	})
}

// LostLease reports whether the child logged (idgen's leaseHolder, to its
// standard error) that its lease was lost: it stalled past the lease, and
// another process may have been granted its node meanwhile.
func (c *Proc) LostLease() bool {
	return strings.Contains(c.Stderr(), "worker lease lost")
}

// LeasedAgain reports whether the child logged, past the first from bytes
// of its standard error, that it renewed or leased again after failing to
// (idgen's leaseHolder logs so): it may issue IDs from then on.
func (c *Proc) LeasedAgain(from int) bool {
	return strings.Contains(c.Stderr()[from:], "worker lease renewed again")
}

// Finish asks a child issuing until stopped to finish, waits for it and
// fails t unless it exited cleanly.
func (c *Proc) Finish(t *testing.T) {
	t.Helper()
	c.Stop()
	c.Wait(t, time.Minute, nil)
}

// IDs reads the IDs the child wrote.
func (c *Proc) IDs(t *testing.T) []uint64 {
	t.Helper()
	b, err := os.ReadFile(c.out)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	ids := make([]uint64, len(b)/8)
	for i := range ids {
		ids[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return ids
}

// Duplicates counts the IDs that appear more than once in all of sets.
func Duplicates(sets ...[]uint64) (total, dups int) {
	var all []uint64
	for _, s := range sets {
		all = append(all, s...)
	}
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			dups++
		}
	}
	return len(all), dups
}

// Bounds returns the least and the greatest of ids, which must not be
// empty.
func Bounds(ids []uint64) (lo, hi uint64) {
	return slices.Min(ids), slices.Max(ids)
}
