package idgen

import (
	"sync"
	"sync/atomic"
	"time"
)

// A Clock tells a Generator the time. It must be safe for concurrent use. A
// clock may step backwards; the generator's rollback policy deals with that.
// Tests inject clocks to simulate rollbacks and full ticks.
type Clock interface {
	// UnixNano returns the current time in nanoseconds since the Unix
	// epoch.
	UnixNano() int64
}

// The system clock re-reads the wall clock this often, and follows it when it
// has stepped by more than resyncStep since the last reading.
const (
	resyncEvery = time.Second
	resyncStep  = time.Millisecond
)

// systemClock is the default Clock. Reading the wall clock in Go costs two
// vDSO calls (wall and monotonic) while the monotonic clock alone costs one,
// so it reads the wall clock once a second and advances with the monotonic
// clock in between (bwmarrin/snowflake uses the monotonic clock only and
// never sees the wall clock step). A step of the wall clock, backwards
// included, therefore reaches the generator within a second.
type systemClock struct {
	start  time.Time    // carries the monotonic reading
	offset atomic.Int64 // wall time minus monotonic time since start
	resync atomic.Int64 // monotonic time since start of the next wall reading
}

func newSystemClock() *systemClock {
	c := &systemClock{start: time.Now()}
	c.offset.Store(c.start.UnixNano())
	c.resync.Store(int64(resyncEvery))
	return c
}

func (c *systemClock) UnixNano() int64 {
	mono := int64(time.Since(c.start))
	if mono >= c.resync.Load() {
		c.sync()
	}
	return c.offset.Load() + mono
}

func (c *systemClock) sync() {
	now := time.Now()
	mono := int64(now.Sub(c.start))
	off := now.UnixNano() - mono
	// Two readings taken apart by a few nanoseconds must not look like a
	// step back; real steps (NTP, an operator, a resumed VM) are larger.
	if d := off - c.offset.Load(); d > int64(resyncStep) || d < -int64(resyncStep) {
		c.offset.Store(off)
	}
	c.resync.Store(mono + int64(resyncEvery))
}

// A coarseClock is a clock that a background goroutine updates every
// resolution, so reading it costs one atomic load instead of a system clock
// read (Config.Coarse).
type coarseClock struct {
	now  atomic.Int64
	stop chan struct{}
	done sync.WaitGroup
	once sync.Once
}

// newCoarseClock starts a coarseClock updated every resolution.
func newCoarseClock(resolution time.Duration) *coarseClock {
	c := &coarseClock{stop: make(chan struct{})}
	c.now.Store(time.Now().UnixNano())
	t := time.NewTicker(resolution)
	c.done.Go(func() {
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-t.C:
				c.now.Store(time.Now().UnixNano())
			}
		}
	})
	return c
}

// UnixNano returns the time of the latest update.
func (c *coarseClock) UnixNano() int64 { return c.now.Load() }

// close stops the updates and waits for the goroutine to end; the clock
// then stands still. It is safe to call more than once.
func (c *coarseClock) close() {
	c.once.Do(func() { close(c.stop) })
	c.done.Wait()
}
