package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/adapter"
	"github.com/idemq/idemq/msgkey"
)

// A claim that fails because the store cannot be reached opens an outage,
// and the messages it left store-down wait in process (see await) until
// the store answers again, instead of being handed back at once: each
// redelivery would find the store down again and spend a reconsume, so a
// group with few reconsumes and short delay levels dead-letters every
// message delivered during an outage of half a minute. While messages wait,
// one probe per Consumer asks the store whether it answers, backing off
// from minProbe to maxProbe; the waiting messages wait for its answer, and
// messages delivered meanwhile do not call the store either: a store whose
// client takes seconds to fail a call (go-redis dials and retries by
// default) is asked once at a time, not once per message.
const (
	minProbe = 50 * time.Millisecond
	maxProbe = 5 * time.Second
)

// The probe extends a lease no record has: a store that answers says the
// lease is lost, and nothing is written.
const (
	probeKey   = "idemq-probe"
	probeToken = "idemq-probe"
)

// outage is what a Consumer knows of its store being down.
type outage struct {
	// epoch counts the outages' openings and closings: odd while one is
	// open, from a failed claim until the store answers again. Every claim
	// reads it before it starts, so that an answer to a call that was sent
	// before the store's state last changed changes nothing: a claim sent
	// before Redis died that succeeds after another one failed does not
	// close the outage, nor does a slow failure reopen one that a probe has
	// just closed.
	epoch atomic.Uint64

	mu       sync.Mutex
	since    time.Time
	err      error         // the last failure
	answered chan struct{} // closed when the store answers again
	backoff  time.Duration // before the probe's next call
	ended    time.Time     // when the last outage ended
	waiters  int           // deliveries waiting for the store
	probe    *prober       // running while waiters > 0
	probed   chan struct{} // closed once the last probe started has returned
	// Messages of this outage, for the log record of its end.
	waited, handedBack int
}

// prober is a running probe.
type prober struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// claim claims items through the guard, runs fn for those acquired and
// notes what the answers say of the store. While the store is down and a
// probe asks it for the messages waiting, claim does not call it: every
// item is store-down, and waits with the others.
func (c *Consumer) claim(ctx context.Context, d *delivery, items []dedupe.Item, fn func(context.Context, int) error) []dedupe.Result {
	if c.options.guard.FailOpen {
		// A failed claim runs the handler unguarded: nothing waits.
		return d.do(ctx, c.guard(), items, fn)
	}
	epoch := c.outage.epoch.Load()
	if epoch&1 == 1 {
		if since, err := c.outage.probing(); err != nil {
			res := make([]dedupe.Result, len(items))
			for i, it := range items {
				res[i] = dedupe.Result{Outcome: dedupe.StoreDown,
					Err: fmt.Errorf("dedupe: claim %s not sent: the store has been down since %s: %w", it.Ref, since.Format(time.RFC3339), err)}
			}
			return res
		}
	}
	res := d.do(ctx, c.guard(), items, fn)
	down, answered := false, false
	var err error
	for _, r := range res {
		switch r.Outcome {
		case dedupe.StoreDown:
			down, err = true, r.Err
		case dedupe.Canceled, dedupe.InvalidKey:
			// Not the store's answer.
		default:
			answered = true
		}
	}
	switch {
	case down:
		c.storeFailed(ctx, err, epoch)
	case answered && epoch&1 == 1:
		c.storeAnswered(ctx, epoch)
	}
	return res
}

// probing returns when the outage began and its last failure while a probe
// runs for it, and a nil error when none does.
func (o *outage) probing() (time.Time, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.epoch.Load()&1 == 0 || o.probe == nil {
		return time.Time{}, nil
	}
	return o.since, o.err
}

// storeFailed notes a claim, sent in epoch, that failed with err, opening
// an outage unless one is open or the store answered since.
func (c *Consumer) storeFailed(ctx context.Context, err error, epoch uint64) {
	o := &c.outage
	o.mu.Lock()
	if cur := o.epoch.Load(); cur != epoch || cur&1 == 1 {
		if cur&1 == 1 {
			o.err = err
		}
		o.mu.Unlock()
		return
	}
	now := time.Now()
	o.epoch.Add(1)
	o.err = err
	o.since, o.answered = now, make(chan struct{})
	o.waited, o.handedBack = 0, 0
	if now.Sub(o.ended) < maxProbe {
		// It answered a moment ago and fails again (a probe answers that
		// claims do not get): back off on from there, so that waiting
		// messages do not claim in a tight loop.
		o.backoff = min(2*o.backoff, maxProbe)
	} else {
		o.backoff = minProbe
	}
	o.mu.Unlock()
	c.stats.Outages.Add(1)
	c.obs.outages.Add(ctx, 1, c.obs.addInGroup...)
	c.logger.WarnContext(ctx, "idemq: dedupe store down; messages wait in process until it answers, spending no reconsume",
		"group", c.group, "err", err, "wait", c.storeWait,
		"fix", "check that the store is reachable; a message is handed back after consumer.WithStoreDownWait, except on its last reconsume")
}

// storeAnswered closes the outage of epoch, if it is still open, on an
// answer to a call sent during it: the waiting messages claim again.
func (c *Consumer) storeAnswered(ctx context.Context, epoch uint64) {
	o := &c.outage
	o.mu.Lock()
	if o.epoch.Load() != epoch {
		o.mu.Unlock()
		return
	}
	now := time.Now()
	o.epoch.Add(1)
	o.ended = now
	close(o.answered)
	since, waited, handedBack := o.since, o.waited, o.handedBack
	o.mu.Unlock()
	c.logger.WarnContext(ctx, "idemq: dedupe store answers again; waiting messages claim their keys",
		"group", c.group, "down", now.Sub(since).Round(time.Millisecond), "waited", waited, "handedBack", handedBack)
}

// awaitStore waits for the store to answer again, for a delivery whose
// waiting items (busy or store-down) include down store-down ones and
// which has waited *waited for it so far. It returns true once the store
// answers (claim them again), and false once the wait is spent and need
// not go on (they are handed back) or a drain or the end of ctx stops it
// (every waiting item is then Canceled).
func (c *Consumer) awaitStore(ctx context.Context, of []int, res []dedupe.Result, waiting []int, down int, waited *time.Duration, mustWait bool, first bool, w adapter.Waiting) bool {
	o := &c.outage
	if first {
		c.stats.StoreWaited.Add(int64(down))
		c.obs.waits.Add(ctx, int64(down), c.obs.addInGroup...)
		o.mu.Lock()
		o.waited += down
		o.mu.Unlock()
	}
	if !mustWait && *waited >= c.storeWait {
		o.mu.Lock()
		o.handedBack += down
		o.mu.Unlock()
		return false
	}
	answered, ok := c.joinOutage()
	if !ok {
		return true // it answered since these claims failed
	}
	defer c.quitOutage()
	if w.Extend != nil {
		for _, j := range waiting {
			w.Extend(of[j], res[of[j]].Wait)
		}
	}
	var spent <-chan time.Time
	if !mustWait {
		t := time.NewTimer(c.storeWait - *waited)
		defer t.Stop()
		spent = t.C
	}
	start := time.Now()
	defer func() { *waited += time.Since(start) }()
	select {
	case <-answered:
		return true
	case <-spent:
		o.mu.Lock()
		o.handedBack += down
		o.mu.Unlock()
		return false
	case <-ctx.Done():
	case <-c.drain:
	}
	cancelWaiting(ctx, of, res, waiting)
	return false
}

// cancelWaiting makes the waiting items Canceled: a drain or the end of
// ctx stopped their wait.
func cancelWaiting(ctx context.Context, of []int, res []dedupe.Result, waiting []int) {
	err := adapter.ErrDraining
	if ctx.Err() != nil {
		err = context.Cause(ctx)
	}
	for _, j := range waiting {
		res[of[j]] = dedupe.Result{Outcome: dedupe.Canceled, Err: err}
	}
}

// joinOutage counts a waiting delivery in, starting the probe if none
// runs, and returns the channel closed when the store answers again; false
// when it has answered already.
func (c *Consumer) joinOutage() (<-chan struct{}, bool) {
	o := &c.outage
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.epoch.Load()&1 == 0 {
		return nil, false
	}
	o.waiters++
	if o.probe == nil {
		ctx, cancel := context.WithCancel(context.Background())
		p := &prober{cancel: cancel, done: make(chan struct{})}
		go c.probeStore(ctx, o.probed, p.done)
		o.probe, o.probed = p, p.done
	}
	return o.answered, true
}

// quitOutage counts a waiting delivery out; the last one out stops the
// probe and waits for it to return.
func (c *Consumer) quitOutage() {
	o := &c.outage
	o.mu.Lock()
	o.waiters--
	p := o.probe
	if o.waiters > 0 {
		p = nil
	} else {
		o.probe = nil
	}
	o.mu.Unlock()
	if p != nil {
		p.cancel()
		<-p.done
	}
}

// probeStore asks the store whether it answers, after the current backoff
// and then twice as long after each failure up to maxProbe, until ctx ends;
// it closes done when it returns. It starts once the probe before it
// (prev, nil for none) has returned, so that one probe calls the store at a
// time.
func (c *Consumer) probeStore(ctx context.Context, prev <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	if prev != nil {
		select {
		case <-prev:
		case <-ctx.Done():
			return
		}
	}
	o := &c.outage
	lease := c.guard().Config().Lease
	for {
		o.mu.Lock()
		wait := o.backoff
		o.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		epoch := o.epoch.Load()
		if epoch&1 == 0 {
			continue // a claim got an answer: the waiters are leaving
		}
		err := c.store.Extend(ctx, c.probe, lease)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil || errors.Is(err, dedupe.ErrLeaseLost) || errors.Is(err, msgkey.ErrInvalid):
			// An answer, whatever it says.
			c.storeAnswered(ctx, epoch)
		default:
			o.mu.Lock()
			if o.epoch.Load() == epoch {
				o.err = err
				o.backoff = min(2*o.backoff, maxProbe)
			}
			o.mu.Unlock()
		}
	}
}
