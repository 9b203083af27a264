package idgen

import (
	"math/bits"
	"testing"
	"time"
)

// unitOf maps any int64 to a unit a layout allows, 1ms to 1s.
func unitOf(v int64) uint64 {
	const lo, hi = uint64(time.Millisecond), uint64(time.Second)
	return lo + uint64(v)%(hi-lo+1)
}

func checkDiv(t *testing.T, n, u uint64) {
	t.Helper()
	m, s := divMagic(u)
	hi, _ := bits.Mul64(n, m)
	if got, want := hi>>s, n/u; got != want {
		t.Fatalf("%d / %d: magic gives %d, want %d", n, u, got, want)
	}
}

func TestDivMagicEdges(t *testing.T) {
	units := []uint64{uint64(time.Millisecond), uint64(time.Millisecond) + 1, 1 << 20, 1<<20 + 1, uint64(10 * time.Millisecond),
		uint64(time.Second) - 1, uint64(time.Second), 999_999_937}
	for _, u := range units {
		for _, n := range []uint64{0, 1, u - 1, u, u + 1, 1<<62 - 1, 1 << 62, maxID - 1, maxID} {
			checkDiv(t, n, u)
		}
		// Multiples of u and their neighbours near the top of the range.
		for k := maxID / u; k > maxID/u-1000; k-- {
			checkDiv(t, k*u-1, u)
			checkDiv(t, k*u, u)
		}
	}
}

func FuzzTickOf(f *testing.F) {
	f.Fuzz(func(t *testing.T, nanos, unit int64) {
		checkDiv(t, uint64(nanos)&maxID, unitOf(unit))
	})
}

func TestSystemClockFollowsSteps(t *testing.T) {
	c := newSystemClock()
	if d := time.Since(time.Unix(0, c.UnixNano())); d < -time.Millisecond || d > time.Second {
		t.Fatalf("system clock %v off the wall clock", d)
	}
	// Pretend the wall clock was an hour ahead at the last reading: the
	// next resync steps back to it, which is how a step back of the wall
	// clock reaches the generator.
	c.offset.Add(int64(time.Hour))
	ahead := c.UnixNano()
	c.resync.Store(0)
	if back := c.UnixNano(); ahead-back < int64(59*time.Minute) {
		t.Fatalf("after resync: %v, before %v", time.Unix(0, back), time.Unix(0, ahead))
	}
	// Differences under resyncStep are not steps.
	c.offset.Add(int64(resyncStep / 2))
	before := c.offset.Load()
	c.resync.Store(0)
	c.UnixNano()
	if c.offset.Load() != before {
		t.Fatal("resync followed a sub-millisecond difference")
	}
}
