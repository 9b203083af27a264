package grpcv5

import (
	"context"
	"sync"
	"time"
)

// hand is a received message in hand: kept invisible to other consumers
// until it is acknowledged or released.
type hand[V view] struct {
	v V
	// mu serialises the calls that use v's receipt handle, which each
	// ChangeInvisibleDuration replaces, and guards until and released.
	mu       sync.Mutex
	until    time.Time // invisible until, by the local clock
	released bool
}

// leaseMargin is added to a busy key's remaining lease when the message
// waiting for it is kept invisible: the redelivery, should this process
// die, comes after the holder's lease has ended, by the store's clock too.
const leaseMargin = 2 * time.Second

// take puts v in hand, invisible until until.
func (r *receiver[V]) take(v V, until time.Time) *hand[V] {
	h := &hand[V]{v: v, until: until}
	r.mu.Lock()
	r.hands[h] = struct{}{}
	r.mu.Unlock()
	return h
}

// drop takes h out of hand.
func (r *receiver[V]) drop(h *hand[V]) {
	r.mu.Lock()
	delete(r.hands, h)
	r.mu.Unlock()
}

// inHand counts the messages in hand.
func (r *receiver[V]) inHand() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.hands)
}

// renew keeps the messages in hand invisible: every tenth of the invisible
// duration, it extends by a whole one those with less than a third left,
// until stop is closed; then it closes done.
func (r *receiver[V]) renew(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(r.cfg.InvisibleDuration / 10)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		r.mu.Lock()
		hs := make([]*hand[V], 0, len(r.hands))
		for h := range r.hands {
			hs = append(hs, h)
		}
		r.mu.Unlock()
		for _, h := range hs {
			h.mu.Lock()
			if !h.released && time.Until(h.until) < r.cfg.InvisibleDuration/3 {
				r.change(h, r.cfg.InvisibleDuration)
			}
			h.mu.Unlock()
		}
	}
}

// extend keeps h invisible for lease and leaseMargin more, at least: h
// waits for a key whose holder holds it that long. Asked again as the
// lease runs down, it changes nothing while half the margin is left.
func (r *receiver[V]) extend(h *hand[V], lease time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.released && time.Until(h.until) < lease+leaseMargin/2 {
		r.change(h, max(lease+leaseMargin, r.cfg.InvisibleDuration))
	}
}

// change makes h's message invisible for d from now; h.mu is held.
func (r *receiver[V]) change(h *hand[V], d time.Duration) {
	start := time.Now()
	if err := r.sc.ChangeInvisibleDuration(h.v, d); err != nil {
		// Should it become visible, its next consumer finds the key held
		// or done: nothing is lost or doubled, an attempt is spent.
		r.log.Warn("idemq: could not keep a message in hand invisible", "msgId", h.v.GetMessageId(), "topic", h.v.GetTopic(), "err", err)
		return
	}
	h.until = start.Add(d)
}

// ack acknowledges h's message.
func (r *receiver[V]) ack(ctx context.Context, h *hand[V]) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.released = true
	// Even after a drain ran out of time: the key is recorded done.
	if err := r.sc.Ack(context.WithoutCancel(ctx), h.v); err != nil {
		r.log.WarnContext(ctx, "idemq: acknowledgement failed; the message comes back and is suppressed", "msgId", h.v.GetMessageId(), "topic", h.v.GetTopic(), "err", err)
	}
}

// release lets h's message go unacknowledged: visible again after delay,
// or, with delay 0, once its invisible duration ends.
func (r *receiver[V]) release(h *hand[V], delay time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.released = true
	if delay > 0 {
		r.change(h, delay)
	}
}
