package idgen_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/internal/testkit"
)

func TestNewValidates(t *testing.T) {
	clock := testkit.NewClock(t0, 0)
	// A layout with five years left at t0.
	short := idgen.Layout{Name: "short", TimeBits: 38, WorkerBits: 10, SequenceBits: 12, Unit: time.Millisecond,
		Epoch: t0.Add(5*365*24*time.Hour - (1<<38)*time.Millisecond)}
	tests := []struct {
		name string
		node int64
		cfg  idgen.Config
		want error
	}{
		{"zero value", 0, idgen.Config{}, nil},
		{"node at max", 1023, idgen.Config{}, nil},
		{"node too big", 1024, idgen.Config{}, idgen.ErrInvalidConfig},
		{"negative node", -1, idgen.Config{}, idgen.ErrInvalidConfig},
		{"node too big for the layout", 1 << 16, idgen.Config{Layout: idgen.Sonyflake}, idgen.ErrInvalidConfig},
		{"bad layout", 0, idgen.Config{Layout: idgen.Layout{Name: "x", TimeBits: 41}}, idgen.ErrInvalidConfig},
		{"short life", 0, idgen.Config{Layout: short}, idgen.ErrInvalidConfig},
		{"short life allowed", 0, idgen.Config{Layout: short, AllowShortLife: true}, nil},
		{"exhausted", 0, idgen.Config{Layout: idgen.UIDGenerator, AllowShortLife: true}, idgen.ErrInvalidConfig},
		{"bump without generation bits", 0, idgen.Config{Rollback: idgen.BumpGeneration{}}, idgen.ErrInvalidConfig},
		{"bump", 0, idgen.Config{Layout: idgen.RollbackBits, Rollback: idgen.BumpGeneration{}}, nil},
		{"wait without max", 0, idgen.Config{Rollback: idgen.Wait{}}, idgen.ErrInvalidConfig},
		{"borrow nested", 0, idgen.Config{Rollback: idgen.Wait{Max: time.Millisecond, Else: idgen.Borrow{MaxAhead: time.Second}}}, idgen.ErrInvalidConfig},
		{"borrow under a unit", 0, idgen.Config{Rollback: idgen.Borrow{MaxAhead: time.Microsecond}}, idgen.ErrInvalidConfig},
		{"borrow", 0, idgen.Config{Rollback: idgen.Borrow{MaxAhead: time.Second, Else: idgen.Wait{Max: time.Second}}}, nil},
		{"switch without source", 0, idgen.Config{Rollback: idgen.SwitchWorker{}}, idgen.ErrInvalidConfig},
		{"bad else", 0, idgen.Config{Rollback: idgen.Wait{Max: time.Millisecond, Else: idgen.Wait{}}}, idgen.ErrInvalidConfig},
		{"negative reserve", 0, idgen.Config{Reserve: -time.Second}, idgen.ErrInvalidConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Clock = clock
			g, err := idgen.New(tt.node, tt.cfg)
			if !errors.Is(err, tt.want) {
				t.Fatalf("New: %v, want %v", err, tt.want)
			}
			if err == nil {
				g.Close()
			}
		})
	}
}

func TestZeroConfigOnNodeZeroIsTwitterNodeZero(t *testing.T) {
	g := testkit.Generator(t, 0, idgen.Config{})
	if g.Config().Layout != idgen.Twitter || g.Node() != 0 {
		t.Fatalf("layout %v node %d", g.Config().Layout, g.Node())
	}
	before := time.Now().Truncate(time.Millisecond)
	p := g.Config().Layout.Decode(testkit.Next(t, g))
	if p.Time.Before(before) || p.Time.After(time.Now()) || p.Node != 0 || p.Generation != 0 {
		t.Fatalf("decoded %+v, issued after %v", p, before)
	}
}

func TestSequenceWithinTick(t *testing.T) {
	clock := testkit.NewClock(t0, 0)
	g := testkit.Generator(t, 37, idgen.Config{Clock: clock})
	var ids []idgen.ID
	for range 4096 {
		ids = append(ids, testkit.Next(t, g))
	}
	testkit.CheckIncreasing(t, ids)
	for i, id := range ids {
		p := g.Config().Layout.Decode(id)
		if !p.Time.Equal(t0) || p.Sequence != int64(i) || p.Node != 37 || p.Datacenter != 1 || p.Worker != 5 {
			t.Fatalf("ID %d decodes to %+v", i, p)
		}
	}
	// The sequence is full and the clock stands still: only the context
	// ends the wait.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := g.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next at a full sequence: %v, want deadline exceeded", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := g.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next at a full sequence: %v, want canceled", err)
	}
}

func TestFullSequenceWaitsForNextTick(t *testing.T) {
	tests := []struct {
		name   string
		layout idgen.Layout
		clock  *testkit.Clock
	}{
		{"twitter spins", idgen.Twitter, testkit.NewClock(t0, 5*time.Microsecond)},
		{"20ms units park", idgen.Layout{Name: "20ms", TimeBits: 38, WorkerBits: 10, SequenceBits: 3,
			Unit: 20 * time.Millisecond, Epoch: idgen.Twitter.Epoch}, testkit.NewRunningClock(t0)},
		{"sonyflake order", idgen.Sonyflake, testkit.NewRunningClock(t0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := testkit.Generator(t, 3, idgen.Config{Layout: tt.layout, Clock: tt.clock})
			per := int(1) << tt.layout.SequenceBits
			var ids []idgen.ID
			for range 2*per + 1 {
				ids = append(ids, testkit.Next(t, g))
			}
			testkit.CheckIncreasing(t, ids)
			prev := g.Config().Layout.Decode(ids[0])
			for i, id := range ids[1:] {
				p := g.Config().Layout.Decode(id)
				if p.Node != 3 {
					t.Fatalf("node %d", p.Node)
				}
				switch {
				case p.Tick == prev.Tick && p.Sequence != prev.Sequence+1:
					t.Fatalf("ID %d: sequence %d after %d in one tick", i+1, p.Sequence, prev.Sequence)
				case p.Tick > prev.Tick && p.Sequence != 0:
					t.Fatalf("ID %d: new tick starts at sequence %d", i+1, p.Sequence)
				}
				prev = p
			}
		})
	}
}

func TestParkHonoursContext(t *testing.T) {
	l := idgen.Layout{Name: "seconds", TimeBits: 32, WorkerBits: 10, SequenceBits: 0, Unit: time.Second, Epoch: idgen.Twitter.Epoch}
	g := testkit.Generator(t, 0, idgen.Config{Layout: l, Clock: testkit.NewClock(t0, 0)})
	testkit.Next(t, g)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := g.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next: %v, want deadline exceeded", err)
	}
}

func TestClockLimits(t *testing.T) {
	short := idgen.Layout{Name: "short", TimeBits: 20, WorkerBits: 10, SequenceBits: 12, Unit: time.Second, Epoch: t0}
	clock := testkit.NewClock(t0, 0)
	g := testkit.Generator(t, 0, idgen.Config{Layout: short, Clock: clock, AllowShortLife: true})
	testkit.Next(t, g)
	clock.Set(idgen.EndOfLife(short).Add(-time.Second))
	if p := g.Config().Layout.Decode(testkit.Next(t, g)); p.Tick != 1<<20-1 {
		t.Fatalf("last tick: %+v", p)
	}
	clock.Set(idgen.EndOfLife(short))
	if _, err := g.Next(context.Background()); !errors.Is(err, idgen.ErrInvalidConfig) {
		t.Fatalf("Next past the end: %v", err)
	}

	future := idgen.Layout{Name: "future", TimeBits: 41, WorkerBits: 10, SequenceBits: 12, Unit: time.Millisecond, Epoch: t0.Add(time.Hour)}
	g = testkit.Generator(t, 0, idgen.Config{Layout: future, Clock: clock})
	clock.Set(t0)
	if _, err := g.Next(context.Background()); !errors.Is(err, idgen.ErrClockBackwards) {
		t.Fatalf("Next before the epoch: %v", err)
	}
}

func TestClose(t *testing.T) {
	g := testkit.Generator(t, 0, idgen.Config{})
	testkit.Next(t, g)
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := g.Next(context.Background()); !errors.Is(err, idgen.ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
	if n, err := g.Fill(context.Background(), make([]idgen.ID, 3)); n != 0 || !errors.Is(err, idgen.ErrClosed) {
		t.Fatalf("Fill after Close: %d, %v", n, err)
	}
}

func TestFill(t *testing.T) {
	tests := []struct {
		layout idgen.Layout
		clock  idgen.Clock
	}{
		{idgen.Twitter, testkit.NewClock(t0, time.Microsecond)},
		{idgen.Sonyflake, testkit.NewRunningClock(t0)},
	}
	for _, tt := range tests {
		t.Run(tt.layout.Name, func(t *testing.T) {
			g := testkit.Generator(t, 9, idgen.Config{Layout: tt.layout, Clock: tt.clock})
			ids := make([]idgen.ID, 3<<tt.layout.SequenceBits+5)
			ids[0] = testkit.Next(t, g)
			if n, err := g.Fill(context.Background(), ids[1:]); n != len(ids)-1 || err != nil {
				t.Fatalf("Fill: %d, %v", n, err)
			}
			ids = append(ids, testkit.Next(t, g))
			testkit.CheckIncreasing(t, ids)
			for _, id := range ids {
				if p := g.Config().Layout.Decode(id); p.Node != 9 {
					t.Fatalf("%d decodes to %+v", id, p)
				}
			}
		})
	}
	// A context ending mid-way leaves what was filled.
	g := testkit.Generator(t, 0, idgen.Config{Clock: testkit.NewClock(t0, 0)})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ids := make([]idgen.ID, 5000)
	if n, err := g.Fill(ctx, ids); n != 4096 || !errors.Is(err, context.Canceled) {
		t.Fatalf("Fill past a full sequence: %d, %v", n, err)
	}
	testkit.CheckIncreasing(t, ids[:4096])
}

func TestConcurrentNextIsUnique(t *testing.T) {
	layouts := []idgen.Layout{idgen.Twitter, idgen.Sonyflake, idgen.JSSafe}
	for _, l := range layouts {
		for _, coarse := range []time.Duration{0, time.Millisecond} {
			t.Run(l.Name, func(t *testing.T) {
				g := testkit.Generator(t, 1, idgen.Config{Layout: l, Coarse: coarse})
				// About a tenth of a second of the layout's capacity.
				const workers = 8
				each := min(3000, int(int64(1)<<l.SequenceBits*int64(time.Second/l.Unit))/100)
				got := make([][]idgen.ID, workers)
				var wg sync.WaitGroup
				for w := range workers {
					wg.Go(func() {
						for i := range each {
							id, err := g.Next(context.Background())
							if err != nil {
								t.Error(err)
								return
							}
							if i%7 == 0 {
								ids := make([]idgen.ID, 5)
								if _, err := g.Fill(context.Background(), ids); err != nil {
									t.Error(err)
									return
								}
								got[w] = append(got[w], ids...)
							}
							got[w] = append(got[w], id)
						}
					})
				}
				wg.Wait()
				var all []idgen.ID
				for _, ids := range got {
					all = append(all, ids...)
				}
				testkit.CheckUnique(t, all)
			})
		}
	}
}

// A coarse generator's IDs follow the system clock, advance with it, and
// its clock stops with Close (goleak would see the goroutine otherwise); a
// Coarse with a Clock, or a negative one, is refused.
func TestCoarse(t *testing.T) {
	g, err := idgen.New(0, idgen.Config{Coarse: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	first := idgen.Twitter.Decode(testkit.Next(t, g)).Time
	if d := time.Since(first); d < -time.Millisecond || d > time.Minute {
		t.Fatalf("coarse clock %v off the system clock", d)
	}
	for idgen.Twitter.Decode(testkit.Next(t, g)).Time.Equal(first) {
		time.Sleep(time.Millisecond)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []idgen.Config{{Coarse: -1}, {Coarse: time.Millisecond, Clock: testkit.NewClock(t0, 0)}} {
		if _, err := idgen.New(0, cfg); !errors.Is(err, idgen.ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
}
