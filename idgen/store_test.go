package idgen_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
)

func TestFileStore(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sub", "node-1.hwm")
	s := idgen.NewFileStore(path)
	if got, err := s.Load(ctx); err != nil || !got.IsZero() {
		t.Fatalf("Load of a missing file: %v, %v", got, err)
	}
	for _, want := range []time.Time{t0, t0.Add(-time.Hour), t0.Add(time.Nanosecond)} {
		if err := s.Save(ctx, want); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Load(ctx); err != nil || !got.Equal(want) {
			t.Fatalf("Load: %v, %v; want %v", got, err, want)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
	for _, bad := range []string{"", "x\n", "-5\n", "1.5"} {
		if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Load(ctx); err == nil {
			t.Errorf("Load of %q: no error", bad)
		}
	}
}

// A restart with the clock behind the previous run's mark never reissues an
// ID, whatever the policy, whether the previous run was closed or crashed.
func TestRestartBehindHighWaterMark(t *testing.T) {
	const reserve = time.Second
	tests := []struct {
		name   string
		policy func() idgen.RollbackPolicy
		layout idgen.Layout
		// The second run either issues IDs at once or fails with
		// ErrClockBackwards until the clock passes the mark.
		issues bool
	}{
		{"refuse", func() idgen.RollbackPolicy { return nil }, idgen.Twitter, false},
		{"wait", func() idgen.RollbackPolicy { return idgen.Wait{Max: time.Millisecond} }, idgen.Twitter, false},
		{"bump", func() idgen.RollbackPolicy { return idgen.BumpGeneration{} }, idgen.RollbackBits, false},
		{"borrow", func() idgen.RollbackPolicy { return idgen.Borrow{MaxAhead: 2 * time.Hour} }, idgen.Twitter, true},
		{"switch", func() idgen.RollbackPolicy { return idgen.SwitchWorker{Source: &pool{ids: []int64{2}}} }, idgen.Twitter, true},
	}
	for _, tt := range tests {
		for _, crash := range []bool{false, true} {
			name := tt.name + "/closed"
			if crash {
				name = tt.name + "/crashed"
			}
			t.Run(name, func(t *testing.T) {
				store := idgen.NewFileStore(filepath.Join(t.TempDir(), "hwm"))
				clock := newFakeClock(t0, time.Microsecond)
				cfg := idgen.Config{Layout: tt.layout, Node: 1, Clock: clock, Store: store, Reserve: reserve, Rollback: tt.policy()}
				g1, err := idgen.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				first := make([]idgen.ID, 10000)
				if _, err := g1.Fill(context.Background(), first); err != nil {
					t.Fatal(err)
				}
				end := clock.Now()
				if !crash {
					if err := g1.Close(); err != nil {
						t.Fatal(err)
					}
				}

				// The clock of the next run is an hour behind.
				clock.Set(t0.Add(-time.Hour))
				g2 := newGen(t, cfg)
				second := make([]idgen.ID, 10000)
				_, err = g2.Fill(context.Background(), second)
				if tt.issues {
					if err != nil {
						t.Fatalf("second run: %v", err)
					}
				} else {
					if !errors.Is(err, idgen.ErrClockBackwards) {
						t.Fatalf("second run an hour behind: %v", err)
					}
					// Just past the previous run's last tick: a
					// closed run's exact mark lets it go on, a
					// crashed run's reservation does not.
					clock.Set(end.Add(time.Millisecond))
					_, err = g2.Fill(context.Background(), second)
					if crash && !errors.Is(err, idgen.ErrClockBackwards) {
						t.Fatalf("second run inside the reservation: %v", err)
					}
					if crash {
						clock.Set(end.Add(reserve + time.Millisecond))
						_, err = g2.Fill(context.Background(), second)
					}
					if err != nil {
						t.Fatalf("second run past the mark: %v", err)
					}
				}
				checkUnique(t, append(first, second...))
				if !tt.issues {
					// Time order holds across the restart.
					checkIncreasing(t, append(first, second...))
				}
			})
		}
	}
}

// failingStore fails its saves.
type failingStore struct{ err error }

func (s failingStore) Load(context.Context) (time.Time, error) { return time.Time{}, nil }
func (s failingStore) Save(context.Context, time.Time) error   { return s.err }

func TestStoreErrors(t *testing.T) {
	down := errors.New("disk full")
	g := newGen(t, idgen.Config{Store: failingStore{down}})
	if _, err := g.NextID(); !errors.Is(err, down) {
		t.Fatalf("Next with a failing store: %v", err)
	}

	path := filepath.Join(t.TempDir(), "hwm")
	if err := os.WriteFile(path, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	g = newGen(t, idgen.Config{Store: idgen.NewFileStore(path)})
	if _, err := g.NextID(); err == nil {
		t.Fatal("Next with an unreadable mark: no error")
	}
}

func TestCloseSavesExactMark(t *testing.T) {
	store := idgen.NewFileStore(filepath.Join(t.TempDir(), "hwm"))
	clock := newFakeClock(t0, 0)
	g := newGen(t, idgen.Config{Clock: clock, Store: store})
	next(t, g)
	if mark, _ := store.Load(context.Background()); !mark.Equal(t0.Add(time.Second + time.Millisecond)) {
		t.Fatalf("reserved mark %v, want t0+1.001s", mark)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if mark, _ := store.Load(context.Background()); !mark.Equal(t0.Add(time.Millisecond)) {
		t.Fatalf("mark after Close %v, want t0+1ms", mark)
	}
}
