package idgen_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/internal/testkit"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func leased(t *testing.T, m *faultLeaser, cfg idgen.Config) *idgen.Generator {
	t.Helper()
	return leasedWith(t, m, cfg, idgen.LeaseConfig{})
}

func leasedWith(t *testing.T, m idgen.Leaser, cfg idgen.Config, lc idgen.LeaseConfig) *idgen.Generator {
	t.Helper()
	if lc.Logger == nil {
		lc.Logger = quiet
	}
	g, err := idgen.NewLeased(context.Background(), m, cfg, lc)
	if err != nil {
		t.Fatalf("NewLeased: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

func TestNewLeasedConfig(t *testing.T) {
	m := newFaultLeaser(t, 4, time.Second)
	store, err := idgen.OpenFileStore(t.TempDir() + "/mark")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	tests := []struct {
		name   string
		leaser idgen.Leaser
		cfg    idgen.Config
		lc     idgen.LeaseConfig
		want   error
	}{
		{"no leaser", nil, idgen.Config{}, idgen.LeaseConfig{}, idgen.ErrInvalidConfig},
		{"node without Static", m, idgen.Config{}, idgen.LeaseConfig{Node: 3}, idgen.ErrInvalidConfig},
		{"with a store", m, idgen.Config{Store: store}, idgen.LeaseConfig{}, idgen.ErrInvalidConfig},
		{"margin too wide", m, idgen.Config{}, idgen.LeaseConfig{Margin: 600 * time.Millisecond}, idgen.ErrInvalidConfig},
		{"negative margin", m, idgen.Config{}, idgen.LeaseConfig{Margin: -1}, idgen.ErrInvalidConfig},
		{"pool wider than the layout", newFaultLeaser(t, 64, time.Second), idgen.Config{Layout: smallNodeLayout()}, idgen.LeaseConfig{}, idgen.ErrInvalidConfig},
		{"static node out of range", m, idgen.Config{}, idgen.LeaseConfig{Static: true, Node: 5000}, idgen.ErrInvalidConfig},
		{"lease shorter than two ticks", m, idgen.Config{Layout: secondsLayout}, idgen.LeaseConfig{}, idgen.ErrInvalidConfig},
		// A lease of 1s less its default margin leaves a window of 800ms:
		// IDs borrowed 799ms ahead would outrun a renewal's window.
		{"lease window shorter than Borrow.MaxAhead", m, idgen.Config{Rollback: idgen.Borrow{MaxAhead: 799 * time.Millisecond}}, idgen.LeaseConfig{}, idgen.ErrInvalidConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.lc.Logger = quiet
			g, err := idgen.NewLeased(context.Background(), tt.leaser, tt.cfg, tt.lc)
			if !errors.Is(err, tt.want) {
				if g != nil {
					g.Close()
				}
				t.Fatalf("NewLeased = %v, want %v", err, tt.want)
			}
		})
	}
	if n := m.held(4); n != 0 {
		t.Errorf("%d nodes held after refusals", n)
	}
}

// secondsLayout ticks once a second.
var secondsLayout = idgen.Layout{
	Name: "seconds", TimeBits: 31, WorkerBits: 10, SequenceBits: 22,
	Unit: time.Second, Epoch: idgen.Twitter.Epoch,
}

// smallNodeLayout holds 32 nodes.
func smallNodeLayout() idgen.Layout {
	l := idgen.Twitter
	l.Name, l.DatacenterBits, l.SequenceBits = "small-node", 0, 17
	return l
}

func TestLeasedTakesNodesAndRefusesWhenFull(t *testing.T) {
	m := newFaultLeaser(t, 2, time.Second)
	a, b := leased(t, m, idgen.Config{}), leased(t, m, idgen.Config{})
	if a.Node() == b.Node() {
		t.Fatalf("two generators hold node %d", a.Node())
	}
	if _, err := idgen.NewLeased(context.Background(), m, idgen.Config{}, idgen.LeaseConfig{Logger: quiet}); !errors.Is(err, idgen.ErrNoFreeNode) {
		t.Fatalf("third generator: %v, want ErrNoFreeNode", err)
	}
	// A static node already held fails at start.
	_, err := idgen.NewLeased(context.Background(), m, idgen.Config{}, idgen.LeaseConfig{Static: true, Node: a.Node(), Logger: quiet})
	if !errors.Is(err, idgen.ErrNoFreeNode) {
		t.Fatalf("static node %d held elsewhere: %v, want ErrNoFreeNode", a.Node(), err)
	}
	// Waiting gets the node once its holder closes.
	done := make(chan *idgen.Generator)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		g, err := idgen.NewLeased(ctx, m, idgen.Config{}, idgen.LeaseConfig{Wait: true, Logger: quiet})
		if err != nil {
			t.Errorf("waiting NewLeased: %v", err)
		}
		done <- g
	}()
	time.Sleep(50 * time.Millisecond)
	node := a.Node()
	last := testkit.Next(t, a)
	a.Close()
	c := <-done
	if c == nil {
		return
	}
	defer c.Close()
	if c.Node() != node {
		t.Fatalf("waiter got node %d, want the released %d", c.Node(), node)
	}
	if id := testkit.Next(t, c); id <= last {
		t.Fatalf("next holder issued %d, not after the last holder's %d", id, last)
	}
}

func TestLeasedStartsAfterHighWater(t *testing.T) {
	m := newFaultLeaser(t, 1, time.Second)
	// An earlier holder reserved up to a minute ahead of the clock.
	clock := testkit.NewRunningClock(t0)
	m.preset(t, 0, t0.Add(time.Minute))
	g := leased(t, m, idgen.Config{Clock: clock, Rollback: idgen.Wait{Max: 2 * time.Minute}})
	clock.Add(time.Minute) // saves the test the wait
	id := testkit.Next(t, g)
	if got := g.Config().Layout.Decode(id).Time; got.Before(t0.Add(time.Minute)) {
		t.Fatalf("first ID at %v, before the high-water mark %v", got, t0.Add(time.Minute))
	}
}

func TestLeasedRenewsAndReleasesExactMark(t *testing.T) {
	// A lease of a second (renewed every third of it) leaves a window of
	// 800ms: a 300ms one failed Next when a loaded machine stalled the
	// renewals for longer than its 240ms window (3 of 240 runs at load 7).
	m := newFaultLeaser(t, 1, time.Second)
	g := leased(t, m, idgen.Config{})
	var last idgen.ID
	for deadline := time.Now().Add(time.Minute); m.renewCount() < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("%d renewals in a minute of a 1s lease", m.renewCount())
		}
		last = testkit.Next(t, g)
	}
	last = testkit.Next(t, g)
	// Each renewal reserves the window up to the next one.
	if mark, at := m.mark(0), g.Config().Layout.Decode(last).Time; !mark.After(at) {
		t.Fatalf("mark %v not after the last ID's time %v", mark, at)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	want := g.Config().Layout.Decode(last).Time.Add(time.Millisecond)
	if got, _ := m.releasedMark(0); !got.Equal(want) {
		t.Fatalf("released with mark %v, want the end of the last tick %v", got, want)
	}
	if _, err := g.Next(context.Background()); !errors.Is(err, idgen.ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
	// The next holder carries on after it at once.
	h := leased(t, m, idgen.Config{})
	if id := testkit.Next(t, h); id <= last {
		t.Fatalf("next holder issued %d, not after %d", id, last)
	}
}

func TestLeasedFencesItselfAndResumes(t *testing.T) {
	const window = 240 * time.Millisecond // the lease less the margin
	m := newFaultLeaser(t, 1, 300*time.Millisecond)
	// The first renewal was sent after start and later ones only move the
	// fence on: a call answered within the window after start was made
	// while the lease was provably live. A machine that stalled for the
	// window (a Next answered 373ms on was refused, at load 20) may rightly
	// be refused, and is not judged.
	start := time.Now()
	g := leased(t, m, idgen.Config{})
	within := func(what string) {
		t.Helper()
		_, err := g.Next(context.Background())
		if err != nil && time.Since(start) < window {
			t.Fatalf("Next %s: %v", what, err)
		} else if err != nil {
			t.Logf("not judged: Next %s, answered %v after the first renewal was sent, past the %v window: %v", what, time.Since(start).Round(time.Millisecond), window, err)
		}
	}
	within("while renewals succeed")
	m.set(func() { m.failing = errStoreDown })
	// Within the lease less the margin IDs keep coming...
	within("with renewals failing, within the lease less the margin")
	// ...and after it none: at the latest, a call begun two seconds on
	// fails. (Judged by a call begun after the deadline, which a stalled
	// machine may reach before it called at all.)
	deadline := time.Now().Add(2 * time.Second)
	var err error
	for {
		past := time.Now().After(deadline)
		if _, err = g.Next(context.Background()); err != nil || past {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !errors.Is(err, idgen.ErrLeaseLost) {
		t.Fatalf("Next with renewals failing: %v, want ErrLeaseLost", err)
	}
	for range 10 {
		if _, err := g.Next(context.Background()); !errors.Is(err, idgen.ErrLeaseLost) {
			t.Fatalf("Next while fenced: %v", err)
		}
	}
	// The replies come back; the store kept the lease all along: it
	// resumes.
	m.set(func() { m.failing = nil })
	testkit.WaitFor(t, "Next to succeed after renewals recovered", func() bool {
		_, err := g.Next(context.Background())
		return err == nil
	})
}

func TestLeasedLosesLeaseAndLeasesAgain(t *testing.T) {
	m := newFaultLeaser(t, 2, 300*time.Millisecond)
	g := leased(t, m, idgen.Config{})
	first := g.Node()
	before := testkit.Next(t, g)
	m.steal(first)
	// The next renewal finds the lease gone and takes the other node.
	testkit.WaitFor(t, "a renewal to leave the stolen node", func() bool { return g.Node() != first })
	id := testkit.Next(t, g)
	if p := g.Config().Layout.Decode(id); p.Node == first || id <= before {
		t.Fatalf("after losing node %d issued %v", first, p)
	}
}

// A node leased after a loss whose first renewal fails is given back, not
// kept beside the node leased on the next try.
func TestLeasedLeasesAgainWithoutLeaking(t *testing.T) {
	m := newFaultLeaser(t, 4, 3*time.Second)
	g := leased(t, m, idgen.Config{})
	first := g.Node()
	m.set(func() { m.failing = errStoreDown })
	m.steal(first)
	// Each try renews the lost lease, then leases a node and fails to
	// renew it: two renewals.
	before := m.renewCount()
	testkit.WaitFor(t, "two failed tries to lease a node again", func() bool { return m.renewCount() >= before+4 })
	m.set(func() { m.failing = nil })
	testkit.WaitFor(t, "a renewal to leave the stolen node", func() bool { return g.Node() != first })
	testkit.Next(t, g)
	// The stolen node's record lasts until its lease ends, unrenewed.
	if n := m.held(4); n > 2 {
		t.Fatalf("%d nodes held after leasing one again; want the new node and at most the stolen one", n)
	}
}

// A lease lost before its first renewal (the process stalled for a lease
// between the grant and the renewal, as a fleet child did at load 40) fails
// NewLeased, unless it waits for a node: then it leases one again.
func TestLeasedLostBeforeFirstRenewal(t *testing.T) {
	m := newFaultLeaser(t, 3, time.Second)
	m.loseGrants(1)
	if _, err := idgen.NewLeased(context.Background(), m, idgen.Config{}, idgen.LeaseConfig{Logger: quiet}); !errors.Is(err, idgen.ErrLeaseLost) {
		t.Fatalf("NewLeased = %v, want ErrLeaseLost", err)
	}
	m.loseGrants(1)
	g := leasedWith(t, m, idgen.Config{}, idgen.LeaseConfig{Wait: true})
	if g.Node() != 2 {
		t.Fatalf("got node %d, want 2: the third granted", g.Node())
	}
	testkit.Next(t, g)
}

func TestLeasedNeverExpiringNode(t *testing.T) {
	m := newFaultLeaser(t, 1, 0) // uid-generator's row per start: TTL 0
	g := leased(t, m, idgen.Config{})
	m.set(func() { m.failing = errStoreDown })
	time.Sleep(50 * time.Millisecond)
	testkit.Next(t, g)
	if n := m.renewCount(); n != 0 {
		t.Fatalf("%d renewals of a lease that never ends", n)
	}
}

// TestLeasedConcurrent issues from many goroutines while renewals run and
// the lease moves to another node; no ID repeats.
func TestLeasedConcurrent(t *testing.T) {
	m := newFaultLeaser(t, 4, 200*time.Millisecond)
	g := leased(t, m, idgen.Config{})
	var mu sync.Mutex
	seen := map[idgen.ID]bool{}
	var wg sync.WaitGroup
	stop := time.Now().Add(600 * time.Millisecond)
	for range 4 {
		wg.Go(func() {
			ids := make([]idgen.ID, 0, 1<<16)
			for time.Now().Before(stop) {
				id, err := g.Next(context.Background())
				if err == nil {
					ids = append(ids, id)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range ids {
				if seen[id] {
					t.Errorf("ID %d issued twice", id)
				}
				seen[id] = true
			}
		})
	}
	time.Sleep(250 * time.Millisecond)
	m.steal(g.Node())
	wg.Wait()
	if len(seen) == 0 {
		t.Fatal("no IDs issued")
	}
}
