package redisidgen_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/redisidgen"
	"github.com/idemq/idemq/internal/testenv"
)

// fenceLease is long against a loaded machine's pauses (over 2 s were
// measured at load 40) so that a lease the test counts on holding does
// hold: the fence tests wait about one lease each, side by side.
const fenceLease = 5 * time.Second

// A lease of fenceLease ends that long after the call that granted or last
// renewed it reached Redis. stalled is called when a step found such a
// lease ended, or a fence passed: it fails the test as a stall of the
// machine if the answer came a whole lease after that call was sent (the
// step proves nothing then), and otherwise returns for the caller to report
// the broken contract.
func stalled(t *testing.T, sent time.Time, what string) {
	t.Helper()
	if d := time.Since(sent); d >= fenceLease {
		t.Fatalf("%s: %v after the call it counts on was sent, a lease of %v may have ended: the machine stalled for a whole lease", what, d.Round(time.Millisecond), fenceLease)
	}
}

// held is a lease of fenceLease the test counts on holding, and when the
// call that granted or last renewed it was sent.
type held struct {
	idgen.Lease
	sent time.Time
}

func acquireHeld(t *testing.T, l *redisidgen.Leaser, req idgen.LeaseRequest) held {
	t.Helper()
	sent := time.Now()
	lease, err := l.Acquire(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	return held{lease, sent}
}

// renew renews h, raising its mark to mark.
func (h *held) renew(t *testing.T, l *redisidgen.Leaser, mark time.Time, what string) {
	t.Helper()
	sent := time.Now()
	lease, err := l.Renew(t.Context(), h.Lease, mark)
	if err != nil {
		if errors.Is(err, idgen.ErrLeaseLost) {
			stalled(t, h.sent, what)
		}
		t.Fatalf("%s = %v", what, err)
	}
	h.Lease, h.sent = lease, sent
}

// waitGrant acquires from l until the fence passes, and checks that the
// grant came no sooner than one lease after since, the moment before the
// call that met the pool without records was sent.
func waitGrant(t *testing.T, l *redisidgen.Leaser, req idgen.LeaseRequest, since time.Time) idgen.Lease {
	t.Helper()
	for {
		lease, err := l.Acquire(t.Context(), req)
		if err == nil {
			if waited := time.Since(since); waited < fenceLease {
				t.Fatalf("granted node %d %v after the records were found lost, before one lease (%v)", lease.Node, waited, fenceLease)
			}
			return lease
		}
		if !errors.Is(err, idgen.ErrNoFreeNode) || !strings.Contains(err.Error(), "lost its records") {
			t.Fatalf("Acquire while recovering = %v", err)
		}
		// Only a hang guard: the fence ends one lease after the call
		// that met the pool without records, however late that was.
		if time.Since(since) > time.Minute {
			t.Fatalf("still recovering after %v: %v", time.Since(since), err)
		}
		time.Sleep(fenceLease / 20)
	}
}

// wantRecovering checks that l grants nothing while its pool recovers: since
// is the moment before the call that met the pool without records was sent.
func wantRecovering(t *testing.T, l *redisidgen.Leaser, req idgen.LeaseRequest, since time.Time) {
	t.Helper()
	lease, err := l.Acquire(t.Context(), req)
	if err == nil {
		stalled(t, since, "a grant during the fence")
	}
	if !errors.Is(err, idgen.ErrNoFreeNode) || !strings.Contains(err.Error(), "lost its records") || !strings.Contains(err.Error(), "until") {
		t.Fatalf("Acquire = node %d, %v; want ErrNoFreeNode, recovering until when", lease.Node, err)
	}
}

// TestRestartFences restarts Redis without persistence under a holder: its
// lease is lost and nothing is granted until one lease has passed.
func TestRestartFences(t *testing.T) {
	t.Parallel()
	r := testenv.StartPrivateRedis(t)
	l := newLeaser(t, newClient(t, r.Addr()), redisidgen.Config{Pool: "restart", Size: 2, Lease: fenceLease})
	ctx := t.Context()
	req := idgen.LeaseRequest{MaxNode: 1, Owner: "a"}
	if err := l.Create(ctx); err != nil {
		t.Fatal(err)
	}
	held := acquireHeld(t, l, req)
	held.renew(t, l, time.UnixMilli(1_700_000_000_000), "Renew")

	if err := r.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Renew(ctx, held.Lease, time.Time{}); !errors.Is(err, idgen.ErrLeaseLost) {
		t.Fatalf("Renew after the restart = %v, want ErrLeaseLost", err)
	}
	if _, err := l.List(ctx); !errors.Is(err, idgen.ErrNoFreeNode) {
		t.Fatalf("List after the restart = %v, want ErrNoFreeNode", err)
	}
	since := time.Now()
	wantRecovering(t, l, req, since)
	wantRecovering(t, l, idgen.LeaseRequest{MaxNode: 1, Static: true, Node: 1}, since)
	if err := l.Create(ctx); !errors.Is(err, redisidgen.ErrPoolExists) {
		t.Fatalf("Create while recovering = %v, want ErrPoolExists", err)
	}
	lease := waitGrant(t, l, req, since)
	if lease.Node != 0 || !lease.HighWater.IsZero() {
		t.Errorf("after the fence got node %d with mark %v; want node 0 (the counter was lost), no mark", lease.Node, lease.HighWater)
	}
	if _, err := l.Renew(ctx, held.Lease, time.Time{}); !errors.Is(err, idgen.ErrLeaseLost) {
		t.Fatalf("Renew of the lost lease after the fence = %v, want ErrLeaseLost", err)
	}
}

// TestFirstUseFences checks that a pool never created waits one lease, as
// one that lost its records, and that Create refuses it then.
func TestFirstUseFences(t *testing.T) {
	t.Parallel()
	c := newClient(t, testenv.Redis(t))
	l := newLeaser(t, c, redisidgen.Config{Pool: poolName(t), Size: 4, Lease: fenceLease})
	req := idgen.LeaseRequest{MaxNode: 3}
	since := time.Now()
	wantRecovering(t, l, req, since)
	wantRecovering(t, l, req, since)
	if err := l.Create(t.Context()); !errors.Is(err, redisidgen.ErrPoolExists) {
		t.Fatalf("Create = %v, want ErrPoolExists", err)
	}
	waitGrant(t, l, req, since)
}

// TestMetaDeleted follows the failover procedure: deleting the meta key
// fences the pool while the leases and marks that survived are kept.
func TestMetaDeleted(t *testing.T) {
	t.Parallel()
	c := newClient(t, testenv.Redis(t))
	ctx := t.Context()
	l := newLeaser(t, c, redisidgen.Config{Pool: poolName(t), Size: 2, Lease: fenceLease})
	if err := l.Create(ctx); err != nil {
		t.Fatal(err)
	}
	req := idgen.LeaseRequest{MaxNode: 1}
	a := acquireHeld(t, l, req)
	mark := time.UnixMilli(1_700_000_123_456).UTC()
	a.renew(t, l, mark, "Renew")
	// b is granted after a's last renewal, so a is the first to end and
	// the first granted after the fence, even should b end too.
	b := acquireHeld(t, l, req)

	if err := c.Del(ctx, redisidgen.PoolKeys(l)[0]).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Renew(ctx, a.Lease, time.Time{}); !errors.Is(err, idgen.ErrLeaseLost) {
		t.Fatalf("Renew without the meta key = %v, want ErrLeaseLost", err)
	}
	since := time.Now()
	wantRecovering(t, l, req, since)
	// b's record survived: it renews through the fence.
	for time.Since(since) < fenceLease*3/2 {
		b.renew(t, l, time.Time{}, "Renew of a surviving lease during the fence")
		time.Sleep(fenceLease / 4)
	}
	got := waitGrant(t, l, req, since)
	if got.Node != a.Node || !got.HighWater.Equal(mark) {
		t.Fatalf("after the fence got node %d with mark %v; want node %d with its mark %v", got.Node, got.HighWater, a.Node, mark)
	}
}

// TestMixedSettings checks that a leaser whose Lease or Size differs from
// the pool's record is refused on every call.
func TestMixedSettings(t *testing.T) {
	c := newClient(t, testenv.Redis(t))
	ctx := t.Context()
	name := poolName(t)
	l := newLeaser(t, c, redisidgen.Config{Pool: name, Size: 4, Lease: time.Second})
	if err := l.Create(ctx); err != nil {
		t.Fatal(err)
	}
	held, err := l.Acquire(ctx, idgen.LeaseRequest{MaxNode: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  redisidgen.Config
	}{
		{"LongerLease", redisidgen.Config{Pool: name, Size: 4, Lease: 2 * time.Second}},
		{"ShorterLease", redisidgen.Config{Pool: name, Size: 4, Lease: 500 * time.Millisecond}},
		{"DefaultLease", redisidgen.Config{Pool: name, Size: 4}},
		{"LargerSize", redisidgen.Config{Pool: name, Size: 8, Lease: time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other := newLeaser(t, c, tc.cfg)
			check := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, idgen.ErrInvalidConfig) || !strings.Contains(err.Error(), "created with Lease 1s and Size 4") {
					t.Errorf("%s = %v, want ErrInvalidConfig naming the pool's settings", what, err)
				}
			}
			_, err := other.Acquire(ctx, idgen.LeaseRequest{MaxNode: tc.cfg.Size - 1})
			check("Acquire", err)
			_, err = other.Renew(ctx, held, time.Time{})
			check("Renew", err)
			check("Release", other.Release(ctx, held, time.Time{}))
			_, err = other.List(ctx)
			check("List", err)
		})
	}
	if _, err := l.Renew(ctx, held, time.Time{}); err != nil {
		t.Fatalf("Renew with the pool's settings = %v", err)
	}
}

// TestList checks what operators see.
func TestList(t *testing.T) {
	c := newClient(t, testenv.Redis(t))
	ctx := t.Context()
	l := newLeaser(t, c, redisidgen.Config{Pool: poolName(t), Size: 4, Lease: time.Minute})
	if _, err := l.List(ctx); !errors.Is(err, idgen.ErrNoFreeNode) {
		t.Fatalf("List of a pool never used = %v, want ErrNoFreeNode", err)
	}
	if err := l.Create(ctx); err != nil {
		t.Fatal(err)
	}
	if infos, err := l.List(ctx); err != nil || len(infos) != 0 {
		t.Fatalf("List of a new pool = %v, %v; want none", infos, err)
	}
	before := time.Now()
	var leases []idgen.Lease
	for _, owner := range []string{"host-c", "host-a", "host-b"} {
		lease, err := l.Acquire(ctx, idgen.LeaseRequest{MaxNode: 3, Owner: owner})
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, lease)
	}
	mark := time.UnixMilli(1_700_000_000_001).UTC()
	if _, err := l.Renew(ctx, leases[1], mark); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx, leases[2], mark); err != nil {
		t.Fatal(err)
	}
	infos, err := l.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []redisidgen.LeaseInfo{{Node: 0, Owner: "host-c"}, {Node: 1, Owner: "host-a", HighWater: mark}}
	if len(infos) != len(want) {
		t.Fatalf("List = %+v, want nodes 0 and 1", infos)
	}
	for i, w := range want {
		got := infos[i]
		if got.Node != w.Node || got.Owner != w.Owner || !got.HighWater.Equal(w.HighWater) {
			t.Errorf("List[%d] = %+v, want %+v", i, got, w)
		}
		// Redis runs on this host: its clock is ours, give or take a
		// moment.
		if lo, hi := before.Add(time.Minute-time.Second), time.Now().Add(time.Minute+time.Second); got.Expires.Before(lo) || got.Expires.After(hi) {
			t.Errorf("List[%d].Expires = %v, want about a minute from now", i, got.Expires)
		}
	}
}

// poolName returns a pool name unique to t and the run, so that tests may
// share a Redis and its old records.
func poolName(t *testing.T) string {
	return strings.ReplaceAll(t.Name(), "/", "-") + "-" + time.Now().Format("150405.000000000")
}
