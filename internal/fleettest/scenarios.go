package fleettest

import (
	"strings"
	"testing"
	"time"
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
