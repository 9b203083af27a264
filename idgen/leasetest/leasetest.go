// Package leasetest checks worker-id leasers against the [idgen.Leaser]
// contract. [Run] is the conformance suite every backend runs from its own
// tests:
//
//	func TestConformance(t *testing.T) {
//		leasetest.Run(t, func(t *testing.T, p leasetest.Pool) idgen.Leaser {
//			return newLeaser(t, p.Name, p.Size, p.TTL)
//		}, nil)
//	}
//
// Every test uses pools of its own, named at random, so the leasers
// newLeaser returns may share one store and its old records.
//
// # What it checks
//
//   - races: goroutines on several leasers race for fewer nodes than they
//     are, fresh and just expired, and exactly as many win as there are
//     nodes, each a different one; the rest get [idgen.ErrNoFreeNode];
//   - expiry by the store's clock: a lease of 3 s not renewed
//     ends, its node goes to the next caller, and the old holder's Renew and
//     Release fail with [idgen.ErrLeaseLost]; renewals keep a lease alive;
//   - the free queue: never-used ids first, then released and expired ones
//     in the order they became free;
//   - static requests: a held node is refused, a free or expired one is
//     granted and leaves the queue; a node outside the pool, or a pool
//     larger than LeaseRequest.MaxNode allows, fails with
//     [idgen.ErrInvalidConfig];
//   - the high-water mark: Renew raises it and never lowers it; Release
//     sets it to the holder's exact mark; the next holder's Lease.HighWater
//     is the last mark written, after a release or an expiry;
//   - forged and stale tokens: Renew and Release fail with
//     [idgen.ErrLeaseLost] and change nothing;
//   - cancelled contexts: every call fails and changes nothing;
//   - owners: stored with the lease, when Run's owner can read them;
//   - churn: goroutines on leasers of their own take, renew and release
//     nodes over and over, dynamic only (no Acquire may fail) and mixed
//     with static ones: no node is ever held twice;
//   - a generator switching nodes ([idgen.SwitchWorker]) through the
//     leaser, each of its calls held in turn by a gate around the leaser:
//     other callers wait for the switch or get an ID, never an error; one
//     switch leases one node; a failed renewal of the fresh lease, or Close
//     during the switch, leaves no lease held and the old node released
//     with the mark of its last ID.
//
// [OneCall] checks a backend's one call that leases a sender's generator.
//
// The tests that wait for leases to end lease for 3 s; the others
// lease for an hour, so that no stall of a loaded machine ends a lease they
// count on. A test that waits for leases to end also counts on others
// holding meanwhile: 3 s is long against a loaded machine's
// pauses (over 2 s were measured at load 40), and a test that finds such a
// lease ended after a stall of a whole lease fails saying so. The subtests
// run in parallel; the suite takes about two such leases longer
// than its slowest wait, about 15 s in all.
package leasetest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
)

// Pool describes the pool one test needs. newLeaser returns a Leaser over
// it that grants at once: a backend that fences a pool it has never seen
// (redisidgen grants nothing for one lease) creates it first. A test may call
// newLeaser more than once with the same Pool, as several processes
// sharing one pool; each later call attaches to the pool the first made.
type Pool struct {
	// Name is unique to the pool and the run: letters, digits and '-',
	// at most 48 bytes.
	Name string
	// Size is the number of node ids, 0 to Size-1.
	Size int64
	// TTL is the lease length the leaser must grant.
	TTL time.Duration
}

// expiringTTL is the lease length of the pools whose tests wait for leases
// to end; they sleep one and a half times it, and the renewal tests renew
// every quarter of it.
const expiringTTL = 3 * time.Second

// Run runs the conformance suite as subtests of t. newLeaser returns the
// leaser under test for a pool; whatever it opens it closes through
// t.Cleanup. owner reads the owner recorded with node's live lease, or ""
// when the node has none; nil skips the Owner test, which the Leaser
// interface alone cannot observe.
func Run(t *testing.T, newLeaser func(t *testing.T, p Pool) idgen.Leaser, owner func(ctx context.Context, l idgen.Leaser, node int64) (string, error)) {
	tests := []struct {
		name string
		fn   func(*suite)
	}{
		{"ConcurrentAcquire", testConcurrentAcquire},
		{"Expiry", testExpiry},
		{"RenewKeepsLease", testRenewKeepsLease},
		{"FreeQueueOrder", testFreeQueueOrder},
		{"ExpiredJoinTail", testExpiredJoinTail},
		{"Static", testStatic},
		{"NodeRange", testNodeRange},
		{"HighWater", testHighWater},
		{"HighWaterAfterExpiry", testHighWaterAfterExpiry},
		{"ForgedToken", testForgedToken},
		{"StaleToken", testStaleToken},
		{"CancelledContext", testCancelledContext},
		{"Owner", testOwner},
		{"Switch", testSwitch},
		{"SwitchRenewalFails", testSwitchRenewalFails},
		{"SwitchClose", testSwitchClose},
	}
	// The churns run first, one at a time: beside the tests that time
	// leases, their load on a store of one writer (SQLite) would stall
	// those.
	for _, tc := range []struct {
		name string
		fn   func(*suite)
	}{{"Churn", testChurn}, {"MixedChurn", testMixedChurn}} {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(&suite{T: t, newLeaser: newLeaser, owner: owner, name: tc.name})
		})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(&suite{T: t, newLeaser: newLeaser, owner: owner, name: tc.name})
		})
	}
}

// suite is one subtest's helpers.
type suite struct {
	*testing.T
	newLeaser func(*testing.T, Pool) idgen.Leaser
	owner     func(ctx context.Context, l idgen.Leaser, node int64) (string, error)
	name      string
	// since, when set, is when the call was sent that granted or renewed
	// the first to end of the leases of expiringTTL the test counts on
	// holding: renew, release, wantNone and wantNodes do.
	since time.Time
}

// holdTTL is the lease of the pools whose tests never wait for one to end.
const holdTTL = time.Hour

// pool returns a new pool of size node ids whose leases outlast the test,
// and a leaser over it.
func (s *suite) pool(size int64) (Pool, idgen.Leaser) {
	s.Helper()
	return s.newPool(size, holdTTL)
}

// expiring returns a new pool of size node ids with leases of
// expiringTTL, and a leaser over it.
func (s *suite) expiring(size int64) (Pool, idgen.Leaser) {
	s.Helper()
	return s.newPool(size, expiringTTL)
}

func (s *suite) newPool(size int64, ttl time.Duration) (Pool, idgen.Leaser) {
	s.Helper()
	p := Pool{Name: poolName(s.name), Size: size, TTL: ttl}
	return p, s.newLeaser(s.T, p)
}

// fail fails the test for what a lease that holds would not do, saying so
// when a lease the test counts on may have ended: s.since lies a lease or
// more back, so the machine stalled for a lease, and a store that let the
// lease go did right.
func (s *suite) fail(format string, args ...any) {
	s.Helper()
	s.stillHeld(fmt.Sprintf(format, args...))
	s.Fatalf(format, args...)
}

// stillHeld fails the test, as a stall of the machine, for what when a
// lease it counts on may have ended by now (see fail).
func (s *suite) stillHeld(what string) {
	s.Helper()
	if d := time.Since(s.since); !s.since.IsZero() && d >= expiringTTL {
		s.Fatalf("%s: the leases counted on were asked for %v ago and may have ended (a lease is %v): the machine stalled for a whole lease", what, d.Round(time.Millisecond), expiringTTL)
	}
}

// poolName returns a name for a pool of the named test, unique to the run.
func poolName(test string) string {
	return fmt.Sprintf("lt-%.24s-%s", strings.ToLower(test), strings.ToLower(rand.Text()[:12]))
}

// expire sleeps until a lease granted or renewed before the call has ended
// by any clock that runs at the rate of ours.
func (s *suite) expire() { time.Sleep(expiringTTL * 3 / 2) }

// all asks for any free node of p.
func all(p Pool, owner string) idgen.LeaseRequest {
	return idgen.LeaseRequest{MaxNode: p.Size - 1, Owner: owner}
}

// static asks for node of p.
func static(p Pool, node int64, owner string) idgen.LeaseRequest {
	return idgen.LeaseRequest{MaxNode: p.Size - 1, Static: true, Node: node, Owner: owner}
}

// acquire takes a node from l and checks the lease.
func (s *suite) acquire(p Pool, l idgen.Leaser, req idgen.LeaseRequest) idgen.Lease {
	s.Helper()
	lease, err := l.Acquire(s.Context(), req)
	if err != nil {
		s.Fatalf("Acquire(%+v) = %v", req, err)
	}
	s.checkLease(p, lease)
	if req.Static && lease.Node != req.Node {
		s.Fatalf("static Acquire of node %d granted node %d", req.Node, lease.Node)
	}
	return lease
}

// checkLease checks the fields of a lease granted or renewed in p.
func (s *suite) checkLease(p Pool, l idgen.Lease) {
	s.Helper()
	if l.Node < 0 || l.Node >= p.Size {
		s.Fatalf("lease of node %d, outside the pool's 0..%d", l.Node, p.Size-1)
	}
	if l.Token == "" {
		s.Fatalf("lease of node %d has no token", l.Node)
	}
	if l.TTL <= 0 || l.TTL > p.TTL {
		s.Fatalf("lease of node %d has TTL %v, want (0, %v]", l.Node, l.TTL, p.TTL)
	}
}

// wantNone checks that l grants no node: err wraps want.
func (s *suite) wantNone(l idgen.Leaser, req idgen.LeaseRequest, want error) {
	s.Helper()
	lease, err := l.Acquire(s.Context(), req)
	switch {
	case err == nil:
		s.fail("Acquire(%+v) = node %d; want %v", req, lease.Node, want)
	case !errors.Is(err, want):
		s.Fatalf("Acquire(%+v) = %v; want %v", req, err, want)
	}
}

// wantNodes acquires one node per entry of want, in order, then checks the
// pool has no more.
func (s *suite) wantNodes(p Pool, l idgen.Leaser, want ...int64) []idgen.Lease {
	s.Helper()
	var got []idgen.Lease
	var nodes []int64
	for range want {
		lease := s.acquire(p, l, all(p, "queue"))
		got = append(got, lease)
		nodes = append(nodes, lease.Node)
	}
	if !slices.Equal(nodes, want) {
		s.fail("free queue granted nodes %v, want %v", nodes, want)
	}
	s.wantNone(l, all(p, "queue"), idgen.ErrNoFreeNode)
	return got
}

func (s *suite) renew(l idgen.Leaser, lease idgen.Lease, mark time.Time) idgen.Lease {
	s.Helper()
	got, err := l.Renew(s.Context(), lease, mark)
	if errors.Is(err, idgen.ErrLeaseLost) {
		s.fail("Renew(node %d) = %v", lease.Node, err)
	}
	if err != nil {
		s.Fatalf("Renew(node %d) = %v", lease.Node, err)
	}
	if got.Node != lease.Node || got.Token != lease.Token {
		s.Fatalf("Renew(node %d, token %q) returned node %d, token %q", lease.Node, lease.Token, got.Node, got.Token)
	}
	return got
}

func (s *suite) release(l idgen.Leaser, lease idgen.Lease, mark time.Time) {
	s.Helper()
	err := l.Release(s.Context(), lease, mark)
	if errors.Is(err, idgen.ErrLeaseLost) {
		s.fail("Release(node %d) = %v", lease.Node, err)
	}
	if err != nil {
		s.Fatalf("Release(node %d) = %v", lease.Node, err)
	}
}

// wantLost checks that lease can be neither renewed nor released.
func (s *suite) wantLost(l idgen.Leaser, lease idgen.Lease, why string) {
	s.Helper()
	if _, err := l.Renew(s.Context(), lease, time.Time{}); !errors.Is(err, idgen.ErrLeaseLost) {
		s.Errorf("%s: Renew(node %d) = %v, want ErrLeaseLost", why, lease.Node, err)
	}
	if err := l.Release(s.Context(), lease, time.Time{}); !errors.Is(err, idgen.ErrLeaseLost) {
		s.Errorf("%s: Release(node %d) = %v, want ErrLeaseLost", why, lease.Node, err)
	}
}

// mark is a high-water mark in whole seconds, which any store keeps exactly.
func mark(sec int64) time.Time { return time.Unix(1_700_000_000+sec, 0) }

func (s *suite) wantMark(what string, got, want time.Time) {
	s.Helper()
	if !got.Equal(want) {
		s.Fatalf("%s: HighWater = %v, want %v", what, got, want)
	}
}

// race runs n goroutines that each acquire a node of p through one of ls,
// and checks that exactly p.Size win, each a different node, and that the
// rest get ErrNoFreeNode. On a machine so loaded that the race outlasts a
// lease, the early winners' leases end during it and later racers may take
// their nodes: then it checks only that no node was granted twice within
// one lease, by when each call started and returned.
func (s *suite) race(p Pool, ls []idgen.Leaser, n int) {
	s.Helper()
	type win struct {
		lease         idgen.Lease
		asked, answer time.Time
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		won    []win
		lost   int
		others []error
	)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			asked := time.Now()
			lease, err := ls[i%len(ls)].Acquire(s.Context(), all(p, fmt.Sprint("racer ", i)))
			answer := time.Now()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won = append(won, win{lease, asked, answer})
			case errors.Is(err, idgen.ErrNoFreeNode):
				lost++
			default:
				others = append(others, err)
			}
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	took := time.Since(began)
	if len(others) > 0 {
		s.Fatalf("racing Acquire failed: %v", errors.Join(others...))
	}
	byNode := map[int64][]win{}
	for _, w := range won {
		s.checkLease(p, w.lease)
		byNode[w.lease.Node] = append(byNode[w.lease.Node], w)
	}
	for node, ws := range byNode {
		slices.SortFunc(ws, func(a, b win) int { return a.answer.Compare(b.answer) })
		for i := 1; i < len(ws); i++ {
			// The later grant came before its answer, the earlier
			// after its request: less than a lease apart for sure.
			if ws[i].answer.Sub(ws[i-1].asked) < p.TTL {
				s.Fatalf("node %d granted twice within %v (a lease is %v)", node, ws[i].answer.Sub(ws[i-1].asked), p.TTL)
			}
		}
	}
	switch {
	case int64(len(byNode)) != p.Size:
		s.Fatalf("%d goroutines raced for %d nodes: %d nodes granted", n, p.Size, len(byNode))
	case took >= p.TTL:
		s.Logf("the race took %v, longer than a lease: %d grants of %d nodes", took, len(won), p.Size)
	case int64(len(won)) != p.Size || lost != n-len(won):
		s.Fatalf("%d goroutines raced for %d nodes: %d won, %d got ErrNoFreeNode", n, p.Size, len(won), lost)
	}
}

// testConcurrentAcquire races goroutines on several leasers (processes)
// for fewer nodes, in a fresh pool and again once every lease has expired.
func testConcurrentAcquire(s *suite) {
	p, l := s.expiring(5)
	ls := []idgen.Leaser{l, s.newLeaser(s.T, p), s.newLeaser(s.T, p)}
	s.race(p, ls, 24)
	s.expire()
	s.race(p, ls, 24)
}

// testExpiry lets a lease run out: the node goes to the next caller and
// the old holder can neither renew nor release it, before or after.
func testExpiry(s *suite) {
	p, a := s.expiring(1)
	b := s.newLeaser(s.T, p)
	s.since = time.Now()
	old := s.acquire(p, a, all(p, "a"))
	s.wantNone(b, all(p, "b"), idgen.ErrNoFreeNode)
	s.since = time.Time{}
	s.expire()
	s.wantLost(a, old, "expired, not yet taken")
	sent := time.Now()
	cur := s.acquire(p, b, all(p, "b"))
	if cur.Node != old.Node || cur.Token == old.Token {
		s.Fatalf("after expiry got node %d token %q; want node %d with a new token", cur.Node, cur.Token, old.Node)
	}
	s.wantLost(a, old, "expired and taken")
	s.since = sent
	sent = time.Now()
	s.renew(b, cur, time.Time{})
	s.since = sent
	s.wantNone(a, all(p, "a"), idgen.ErrNoFreeNode)
}

// testRenewKeepsLease renews a lease well within its TTL for twice its TTL:
// nobody else gets the node.
func testRenewKeepsLease(s *suite) {
	p, a := s.expiring(1)
	b := s.newLeaser(s.T, p)
	s.since = time.Now()
	lease := s.acquire(p, a, all(p, "a"))
	for end := time.Now().Add(2 * p.TTL); time.Now().Before(end); {
		time.Sleep(p.TTL / 4)
		sent := time.Now()
		lease = s.renew(a, lease, time.Time{})
		s.since = sent
		s.checkLease(p, lease)
		s.wantNone(b, all(p, "b"), idgen.ErrNoFreeNode)
	}
	s.release(a, lease, time.Time{})
	s.since = time.Time{}
	s.acquire(p, b, all(p, "b"))
}

// testFreeQueueOrder checks the free queue: never-used ids first, then
// released ones in the order they were released.
func testFreeQueueOrder(s *suite) {
	p, l := s.pool(4)
	held := map[int64]bool{}
	var ls []idgen.Lease
	for range 3 {
		lease := s.acquire(p, l, all(p, "first"))
		held[lease.Node] = true
		ls = append(ls, lease)
	}
	if len(held) != 3 {
		s.Fatalf("three acquires granted nodes %v", held)
	}
	var unused int64
	for unused = range p.Size {
		if !held[unused] {
			break
		}
	}
	s.release(l, ls[1], time.Time{})
	s.release(l, ls[0], time.Time{})
	s.wantNodes(p, l, unused, ls[1].Node, ls[0].Node)
}

// testExpiredJoinTail checks that expired nodes join the queue's tail in
// the order they expired, behind nodes released before and ahead of nodes
// released after.
func testExpiredJoinTail(s *suite) {
	p, l := s.expiring(3)
	s.since = time.Now()
	a := s.acquire(p, l, all(p, "a"))
	b := s.acquire(p, l, all(p, "b"))
	c := s.acquire(p, l, all(p, "c"))
	time.Sleep(p.TTL / 10)
	a = s.renew(l, a, time.Time{}) // now c expires before a
	s.release(l, b, time.Time{})
	s.stillHeld("b released before c's lease ended")
	s.since = time.Time{}
	s.expire()
	// The nodes granted next are counted on until the pool is found empty.
	s.since = time.Now()
	got := s.wantNodes(p, l, b.Node, c.Node, a.Node)

	// x expires while y and z are renewed; then z is released: x goes
	// first.
	x, y, z := got[0], got[1], got[2]
	for end := time.Now().Add(expiringTTL * 3 / 2); time.Now().Before(end); {
		time.Sleep(p.TTL / 4)
		sent := time.Now()
		y = s.renew(l, y, time.Time{})
		z = s.renew(l, z, time.Time{})
		s.since = sent
	}
	s.release(l, z, time.Time{})
	s.wantNodes(p, l, x.Node, z.Node)
}

// testStatic takes named nodes: free ones are granted and leave the queue,
// held ones are refused, expired ones are taken over.
func testStatic(s *suite) {
	p, a := s.pool(3)
	b := s.newLeaser(s.T, p)
	one := s.acquire(p, a, static(p, 1, "a"))
	s.wantNone(b, static(p, 1, "b"), idgen.ErrNoFreeNode)
	two := s.acquire(p, b, static(p, 2, "b"))
	zero := s.acquire(p, a, all(p, "a"))
	if zero.Node != 0 {
		s.Fatalf("with nodes 1 and 2 taken statically, Acquire granted node %d, want 0", zero.Node)
	}
	s.wantNone(a, all(p, "a"), idgen.ErrNoFreeNode)

	// A released node taken statically leaves the queue.
	s.release(a, one, time.Time{})
	s.acquire(p, b, static(p, 1, "b"))
	s.wantNone(a, all(p, "a"), idgen.ErrNoFreeNode)
	s.release(b, two, time.Time{})
	s.wantNodes(p, a, 2)

	// An expired node is taken over.
	q, c := s.expiring(3)
	d := s.newLeaser(s.T, q)
	held := s.acquire(q, d, static(q, 1, "d"))
	s.expire()
	s.acquire(q, c, static(q, 1, "c"))
	s.wantLost(d, held, "expired node taken statically")
}

// testNodeRange checks that a pool larger than the caller's layout, or a
// static node outside the pool, is refused with ErrInvalidConfig and grants
// nothing.
func testNodeRange(s *suite) {
	p, l := s.pool(4)
	for _, tc := range []struct {
		name string
		req  idgen.LeaseRequest
	}{
		{"MaxNodeBelowPool", idgen.LeaseRequest{MaxNode: p.Size - 2}},
		{"MaxNodeZero", idgen.LeaseRequest{MaxNode: 0}},
		{"StaticWithMaxNodeBelowPool", idgen.LeaseRequest{MaxNode: p.Size - 2, Static: true, Node: 0}},
		{"StaticBeyondPool", idgen.LeaseRequest{MaxNode: p.Size, Static: true, Node: p.Size}},
		{"StaticNegative", idgen.LeaseRequest{MaxNode: p.Size - 1, Static: true, Node: -1}},
	} {
		s.Run(tc.name, func(t *testing.T) {
			lease, err := l.Acquire(t.Context(), tc.req)
			if !errors.Is(err, idgen.ErrInvalidConfig) {
				t.Fatalf("Acquire(%+v) = node %d, %v; want ErrInvalidConfig", tc.req, lease.Node, err)
			}
		})
	}
	// Nothing was granted: all four nodes are free.
	for range p.Size {
		s.acquire(p, l, all(p, "after"))
	}
	s.wantNone(l, all(p, "after"), idgen.ErrNoFreeNode)
}

// testHighWater checks that Renew raises the mark and never lowers it, that
// Release sets it, and that the next holder starts from it.
func testHighWater(s *suite) {
	p, l := s.pool(1)
	lease := s.acquire(p, l, all(p, "a"))
	if !lease.HighWater.IsZero() {
		s.Fatalf("never-used node %d has HighWater %v, want zero", lease.Node, lease.HighWater)
	}
	steps := []struct {
		name      string
		mark      time.Time
		wantAfter time.Time
	}{
		{"raise", mark(10), mark(10)},
		{"same", mark(10), mark(10)},
		{"lower", mark(5), mark(10)},
		{"zero", time.Time{}, mark(10)},
		{"raise again", mark(20), mark(20)},
	}
	for _, st := range steps {
		lease = s.renew(l, lease, st.mark)
		s.wantMark("Renew to "+st.name, lease.HighWater, st.wantAfter)
	}
	s.release(l, lease, mark(30))
	lease = s.acquire(p, l, all(p, "b"))
	s.wantMark("after Release raised it", lease.HighWater, mark(30))
	// A holder that reserved ahead releases with what it really issued.
	lease = s.renew(l, lease, mark(40))
	s.release(l, lease, mark(35))
	lease = s.acquire(p, l, all(p, "c"))
	s.wantMark("after Release below the reservation", lease.HighWater, mark(35))
	lease = s.renew(l, lease, time.Time{})
	s.wantMark("Renew without a mark", lease.HighWater, mark(35))
	s.release(l, lease, time.Time{})
	lease = s.acquire(p, l, all(p, "d"))
	s.wantMark("Release without a mark", lease.HighWater, mark(35))
}

// testHighWaterAfterExpiry checks that a mark written by renewal survives
// the lease's expiry.
func testHighWaterAfterExpiry(s *suite) {
	p, a := s.expiring(1)
	b := s.newLeaser(s.T, p)
	s.since = time.Now()
	lease := s.acquire(p, a, all(p, "a"))
	s.renew(a, lease, mark(40))
	s.since = time.Time{}
	s.expire()
	lease = s.acquire(p, b, all(p, "b"))
	s.wantMark("after expiry", lease.HighWater, mark(40))
}

// testForgedToken checks that a lease with a token the store never issued
// for the node can neither renew nor release it, nor raise its mark.
func testForgedToken(s *suite) {
	p, l := s.pool(2)
	mine := s.acquire(p, l, all(p, "mine"))
	other := s.acquire(p, l, all(p, "other"))
	for _, tc := range []struct {
		name  string
		lease idgen.Lease
	}{
		{"Forged", idgen.Lease{Node: mine.Node, Token: "forged", TTL: p.TTL}},
		{"Empty", idgen.Lease{Node: mine.Node, TTL: p.TTL}},
		{"OtherNodesToken", idgen.Lease{Node: mine.Node, Token: other.Token, TTL: p.TTL}},
		{"PrefixOfToken", idgen.Lease{Node: mine.Node, Token: mine.Token[:len(mine.Token)-1], TTL: p.TTL}},
		{"NodeOutsidePool", idgen.Lease{Node: p.Size, Token: mine.Token, TTL: p.TTL}},
	} {
		s.Run(tc.name, func(t *testing.T) {
			if _, err := l.Renew(t.Context(), tc.lease, mark(50)); !errors.Is(err, idgen.ErrLeaseLost) {
				t.Errorf("Renew = %v, want ErrLeaseLost", err)
			}
			if err := l.Release(t.Context(), tc.lease, mark(50)); !errors.Is(err, idgen.ErrLeaseLost) {
				t.Errorf("Release = %v, want ErrLeaseLost", err)
			}
		})
	}
	// Nothing changed: both leases hold, no mark was raised.
	mine = s.renew(l, mine, time.Time{})
	s.wantMark("after forged calls", mine.HighWater, time.Time{})
	other = s.renew(l, other, time.Time{})
	s.wantMark("after forged calls", other.HighWater, time.Time{})
	s.wantNone(l, all(p, "third"), idgen.ErrNoFreeNode)
}

// testStaleToken checks that the lease of a former holder, released or
// expired, cannot touch the node's current lease.
func testStaleToken(s *suite) {
	p, a := s.pool(1)
	b := s.newLeaser(s.T, p)
	old := s.acquire(p, a, all(p, "a"))
	s.release(a, old, mark(1))
	cur := s.acquire(p, b, all(p, "b"))
	if _, err := a.Renew(s.Context(), old, mark(60)); !errors.Is(err, idgen.ErrLeaseLost) {
		s.Fatalf("Renew of a released lease = %v, want ErrLeaseLost", err)
	}
	if err := a.Release(s.Context(), old, mark(60)); !errors.Is(err, idgen.ErrLeaseLost) {
		s.Fatalf("second Release = %v, want ErrLeaseLost", err)
	}
	cur = s.renew(b, cur, time.Time{})
	s.wantMark("after stale calls", cur.HighWater, mark(1))
	s.wantNone(a, all(p, "a"), idgen.ErrNoFreeNode)
}

// testCancelledContext checks that every call with a done context fails
// and changes nothing.
func testCancelledContext(s *suite) {
	cancelled, cancel := context.WithCancel(s.Context())
	cancel()
	expired, cancel2 := context.WithDeadline(s.Context(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, c := range []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"Cancelled", cancelled, context.Canceled},
		{"DeadlineExceeded", expired, context.DeadlineExceeded},
	} {
		s.Run(c.name, func(t *testing.T) {
			s := &suite{T: t, newLeaser: s.newLeaser, owner: s.owner, name: s.name}
			p, l := s.pool(2)
			held := s.acquire(p, l, all(p, "held"))
			check := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, c.want) {
					t.Errorf("%s = %v, want %v", what, err, c.want)
				}
			}
			_, err := l.Acquire(c.ctx, all(p, "cancelled"))
			check("Acquire", err)
			_, err = l.Acquire(c.ctx, static(p, 1-held.Node, "cancelled"))
			check("static Acquire", err)
			_, err = l.Renew(c.ctx, held, mark(70))
			check("Renew", err)
			check("Release", l.Release(c.ctx, held, mark(70)))

			held = s.renew(l, held, time.Time{})
			s.wantMark("after cancelled calls", held.HighWater, time.Time{})
			free := s.acquire(p, l, all(p, "after"))
			if free.Node == held.Node {
				s.Fatalf("held node %d granted again", held.Node)
			}
			s.wantNone(l, all(p, "after"), idgen.ErrNoFreeNode)
		})
	}
}

// testOwner checks that the owner is recorded with the lease and replaced
// by the next holder's.
func testOwner(s *suite) {
	if s.owner == nil {
		s.Log("no owner reader: owners not checked")
		return
	}
	p, l := s.pool(1)
	owner := func(node int64) string {
		s.Helper()
		o, err := s.owner(s.Context(), l, node)
		if err != nil {
			s.Fatalf("Owner(%d) = %v", node, err)
		}
		return o
	}
	for _, name := range []string{"host-a pid 4242", `quote' "and" \ {tag} %s`, "主机-甲", ""} {
		lease := s.acquire(p, l, all(p, name))
		if got := owner(lease.Node); got != name {
			s.Errorf("owner of node %d = %q, want %q", lease.Node, got, name)
		}
		lease = s.renew(l, lease, time.Time{})
		if got := owner(lease.Node); got != name {
			s.Errorf("owner of node %d after Renew = %q, want %q", lease.Node, got, name)
		}
		s.release(l, lease, time.Time{})
		if got := owner(lease.Node); got != "" {
			s.Errorf("owner of released node %d = %q, want none", lease.Node, got)
		}
	}
}

// testChurn has as many goroutines as nodes, each on a leaser of its own
// (a process), take, renew and release nodes over and over: since there is
// always a free node when one asks, no Acquire may fail, whatever the
// others do meanwhile.
func testChurn(s *suite) { s.churn(6, 6, 40, false) }

// testMixedChurn has twice as many goroutines as nodes take them by static
// and dynamic acquires at once, renew and release them: no node is held
// twice, and no call fails but a refused Acquire. (On MySQL an UPDATE that
// picked its node through the index on (pool, expires_at, node) deadlocked
// here with renewals, releases and static acquires.)
func testMixedChurn(s *suite) { s.churn(8, 16, 15, true) }

// churn runs goroutines, each rounds times, on a pool of size nodes; with
// mixed, every third acquire asks for a static node.
func (s *suite) churn(size int64, goroutines, rounds int, mixed bool) {
	p, l := s.pool(size)
	ls := []idgen.Leaser{l}
	for len(ls) < goroutines {
		ls = append(ls, s.newLeaser(s.T, p))
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		holder = map[int64]int{} // by our own bookkeeping
		grants int
	)
	hold := func(node int64, g int) {
		mu.Lock()
		defer mu.Unlock()
		if other, ok := holder[node]; ok {
			s.Errorf("node %d granted to %d while %d holds it", node, g, other)
		}
		holder[node] = g
		grants++
	}
	for g, l := range ls {
		wg.Go(func() {
			for i := range rounds {
				req := all(p, fmt.Sprint("churner ", g))
				if mixed && (g+i)%3 == 0 {
					req = static(p, int64(g*7+i*13)%size, req.Owner)
				}
				lease, err := l.Acquire(s.Context(), req)
				if mixed && errors.Is(err, idgen.ErrNoFreeNode) {
					continue
				}
				if err != nil {
					s.Errorf("goroutine %d round %d: Acquire(%+v) = %v", g, i, req, err)
					return
				}
				hold(lease.Node, g)
				if i%2 == 0 {
					if lease, err = l.Renew(s.Context(), lease, mark(int64(i))); err != nil {
						s.Errorf("Renew = %v", err)
						return
					}
				}
				mu.Lock()
				delete(holder, lease.Node)
				mu.Unlock()
				if err := l.Release(s.Context(), lease, mark(int64(i))); err != nil {
					s.Errorf("Release = %v", err)
				}
			}
		})
	}
	wg.Wait()
	s.Logf("%d grants", grants)
}

// OneCall checks a backend's one call that leases a sender's generator:
// lease leases one from pool, ready to grant, and held counts the pool's
// live leases. Two generators hold two nodes of the pool, each released on
// Close, and a pool left out is refused with an error that names Pool.
func OneCall(t *testing.T, pool string, lease func(ctx context.Context, pool string) (*idgen.Generator, error), held func(ctx context.Context) (int, error)) {
	t.Helper()
	ctx := t.Context()
	var gens []*idgen.Generator
	for range 2 {
		g, err := lease(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		gens = append(gens, g)
	}
	if gens[0].Node() == gens[1].Node() {
		t.Fatalf("two leases share node %d", gens[0].Node())
	}
	wantHeld := func(want int, when string) {
		t.Helper()
		if n, err := held(ctx); err != nil || n != want {
			t.Fatalf("%d leases held %s (%v), want %d", n, when, err, want)
		}
	}
	wantHeld(2, "")
	for _, g := range gens {
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
	}
	wantHeld(0, "after Close")
	if _, err := lease(ctx, ""); err == nil || !strings.Contains(err.Error(), "Pool") {
		t.Errorf("Lease without a pool: %v, want an error naming Pool", err)
	}
}
