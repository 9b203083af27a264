package fleettest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemq/idemq/internal/testkit"
)

// The scenarios every leaser's fleet tests run, on a fleet whose pool is
// ready to grant.

// RaceForNodes starts 7 processes on f, a pool of 3 node ids: exactly 3
// hold one, the others fail at start with ErrNoFreeNode, and no ID repeats.
// The lease should be long against a loaded machine's pauses (processes
// stalled past a lease of 2 s at load 77): nothing waits for it to end,
// and a process that lost its node fails the test as a stall.
func RaceForNodes(t *testing.T, f *Fleet) {
	t.Helper()
	var kids []*Proc
	for range 7 {
		kids = append(kids, f.Start(t, 0, false))
	}
	holders := map[int64]int{}
	var twice []int64
	refused, lost := 0, 0
	for _, c := range kids {
		switch l := c.Await(t, 30*time.Second); {
		case strings.HasPrefix(l, "node "):
			if holders[c.Node]++; holders[c.Node] == 2 {
				twice = append(twice, c.Node)
			}
		case l == "no free node":
			c.Wait(t, time.Minute, nil)
			refused++
		case l == "lost at start":
			c.Wait(t, time.Minute, nil)
			lost++
		default:
			c.Wait(t, time.Minute, nil)
			t.Errorf("child said %q, want a node or no free node", l)
		}
	}
	var sets [][]uint64
	for _, c := range kids {
		if c.Node >= 0 {
			c.Finish(t)
			sets = append(sets, c.IDs(t))
			if c.LostLease() {
				lost++
			}
		}
	}
	if n, d := Duplicates(sets...); d != 0 || n == 0 {
		t.Fatalf("%d IDs, %d duplicates", n, d)
	}
	if lost > 0 {
		t.Fatalf("%d processes lost their leases during the race: the machine stalled past a lease; %d held nodes %v, %d were refused", lost, len(sets), holders, refused)
	}
	for _, node := range twice {
		t.Errorf("node %d held by two processes", node)
	}
	if len(holders) != 3 || len(sets) != 3 || refused != 4 {
		t.Fatalf("%d processes hold nodes %v and %d were refused; want 3 and 4", len(sets), holders, refused)
	}
}

// KilledHolder kills a holder of f, a pool of one node leased for lease,
// with SIGKILL: the node is granted again only after its lease, and the new
// holder's IDs are all greater than every ID the killed one issued.
func KilledHolder(t *testing.T, f *Fleet, lease time.Duration) {
	t.Helper()
	a := f.Start(t, 0, true)
	if l := a.Await(t, 30*time.Second); l != "node 0" {
		t.Fatalf("first holder said %q", l)
	}
	time.Sleep(lease) // a few renewals
	a.AwaitIDs(t)
	a.Kill(t)
	killed := a.Signalled
	b := f.Start(t, 0, true)
	if l := b.Await(t, 30*time.Second); l != "node 0" {
		t.Fatalf("next holder said %q", l)
	}
	// Renewals come every third of the lease, so at the kill it had two
	// thirds left, or one third if a loaded machine held a renewal back a
	// whole period (939ms of a 2s lease was seen so). A store that granted
	// a live lease's node would do so at once.
	if waited := time.Since(killed); waited < lease/3 {
		t.Fatalf("node granted again %v after its holder was killed, within its %v lease", waited, lease)
	}
	b.AwaitIDs(t)
	b.Finish(t)
	old, next := a.IDs(t), b.IDs(t)
	if len(old) == 0 || len(next) == 0 {
		t.Fatalf("old holder wrote %d IDs, new holder %d", len(old), len(next))
	}
	_, oldMax := Bounds(old)
	nextMin, _ := Bounds(next)
	if nextMin <= oldMax {
		t.Fatalf("new holder's first ID %d is not above the killed holder's last %d", nextMin, oldMax)
	}
}

// StoppedHolder stops a holder of f, a pool of one node leased for lease,
// with SIGSTOP past its lease, lets another process take the node and
// resumes it with SIGCONT: the stopped one says "fenced" and issues nothing
// until it holds a lease again, which it cannot while the new holder
// renews. The lease should be long against a loaded machine's pauses (over
// 2 s were measured at load 40), so that the new holder renews in time.
func StoppedHolder(t *testing.T, f *Fleet, lease time.Duration) {
	t.Helper()
	a := f.Start(t, 0, true)
	if l := a.Await(t, 30*time.Second); l != "node 0" {
		t.Fatalf("first holder said %q", l)
	}
	// Each holder has issued before the other goes on: a fixed pause
	// proves nothing on a loaded machine, where a child that said "node 0"
	// was seen to stall past half a lease and write no ID.
	a.AwaitIDs(t)
	a.Pause(t)
	time.Sleep(lease + lease/2)
	b := f.Start(t, 0, true)
	if l := b.Await(t, 30*time.Second); l != "node 0" {
		t.Fatalf("next holder said %q", l)
	}
	b.AwaitIDs(t)
	logged := len(a.Stderr()) // it is stopped
	leasedAgain := func() {
		t.Helper()
		if n, d := Duplicates(a.IDs(t), b.IDs(t)); d != 0 {
			t.Errorf("%d of %d IDs issued twice", d, n)
		}
		t.Fatalf("the resumed holder leased node 0 again while the new holder should hold it: the new holder stalled past its lease of %v, or the pool let a second holder in", lease)
	}
	a.Resume(t)
	said := ""
	testkit.WaitFor(t, "the resumed holder to be refused", func() bool {
		said, _ = a.Said()
		return said != "" || a.LeasedAgain(logged)
	})
	if said == "" {
		a.Finish(t)
		b.Finish(t)
		leasedAgain()
	}
	if said != "fenced" {
		t.Fatalf("resumed holder said %q, want fenced", said)
	}
	time.Sleep(lease) // it retries to lease, and fails: the pool is full
	a.Finish(t)
	b.Finish(t)
	if a.LeasedAgain(logged) {
		leasedAgain()
	}
	stopped, next := a.IDs(t), b.IDs(t)
	if n, d := Duplicates(stopped, next); d != 0 {
		t.Fatalf("%d of %d IDs issued twice", d, n)
	}
	_, stoppedMax := Bounds(stopped)
	nextMin, _ := Bounds(next)
	if stoppedMax >= nextMin {
		t.Fatalf("the stopped holder issued %d after the new holder's first ID %d", stoppedMax, nextMin)
	}
}

// Churn runs 8 slots of processes, 1M IDs a slot, on f, a pool of 4 node
// ids: processes exit, are killed and start again, waiting for a free
// node; no ID is issued twice.
func Churn(t *testing.T, f *Fleet) {
	t.Helper()
	const (
		slots   = 8
		perSlot = 1_000_000
		perProc = 125_000
	)
	var (
		mu   sync.Mutex
		sets [][]uint64
	)
	// Each slot is a parallel subtest, so that it may fail its test.
	t.Run("slots", func(t *testing.T) {
		for s := range slots {
			t.Run(fmt.Sprint(s), func(t *testing.T) {
				t.Parallel()
				for p := 0; p < perSlot/perProc; p++ {
					var c *Proc
					if s%4 == 0 && p%3 == 1 {
						// Killed once it has issued IDs under a node: its
						// lease must expire. It issues until killed, as one
						// given a count could finish first (125,000 IDs
						// took less than the 20 ms the test once waited).
						c = f.Start(t, 0, true)
						if l := c.Await(t, time.Minute); !strings.HasPrefix(l, "node ") {
							t.Errorf("child said %q", l)
						}
						c.AwaitIDs(t)
						c.Kill(t)
					} else {
						c = f.Start(t, perProc, true)
						c.Wait(t, time.Minute, nil)
					}
					ids := c.IDs(t)
					mu.Lock()
					sets = append(sets, ids)
					mu.Unlock()
				}
			})
		}
	})
	n, d := Duplicates(sets...)
	t.Logf("%d processes issued %d IDs over %d node ids", len(sets), n, f.pool.Size)
	if d != 0 {
		t.Fatalf("%d of %d IDs issued twice", d, n)
	}
	if n < slots*perSlot*3/4 {
		t.Fatalf("only %d IDs issued", n)
	}
}
