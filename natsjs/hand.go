package natsjs

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemq/idemq/internal/adapter"
)

// hand is a fetched message in hand: kept from redelivery with InProgress
// until it is acknowledged or handed back.
type hand struct {
	m jetstream.Msg
	// mu serialises the calls on m and guards kept and settled.
	mu      sync.Mutex
	kept    time.Time // when the server last restarted m's AckWait
	settled bool
}

// take puts ms in hand.
func (r *Receiver) take(ms []jetstream.Msg) []*hand {
	now := time.Now()
	hs := make([]*hand, len(ms))
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, m := range ms {
		hs[i] = &hand{m: m, kept: now}
		r.hands[hs[i]] = struct{}{}
	}
	return hs
}

// drop takes hs out of hand.
func (r *Receiver) drop(hs []*hand) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range hs {
		delete(r.hands, h)
	}
}

// renew keeps the messages in hand from redelivery: every tenth of the
// AckWait, it sends InProgress for those kept a third of it ago, until
// stop is closed; then it closes done. A third leaves two for the
// InProgress to arrive: one that arrives after AckWait is too late, and
// the message is redelivered elsewhere.
func (r *Receiver) renew(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(r.ackWait / 10)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		r.mu.Lock()
		hs := make([]*hand, 0, len(r.hands))
		for h := range r.hands {
			hs = append(hs, h)
		}
		r.mu.Unlock()
		for _, h := range hs {
			h.mu.Lock()
			if !h.settled && time.Since(h.kept) >= r.ackWait/3 {
				start := time.Now()
				if err := h.m.InProgress(); err != nil {
					// Should it be redelivered, its next consumer finds the
					// key held or done: nothing is lost or doubled.
					r.log.Warn("idemq: could not keep a message in hand", "subject", h.m.Subject(), "err", err)
				} else {
					h.kept = start
				}
			}
			h.mu.Unlock()
		}
	}
}

// settle does with h's message what v says.
func (r *Receiver) settle(ctx context.Context, h *hand, v adapter.Verdict) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.settled = true
	var err error
	switch v.Action {
	case adapter.Ack:
		// Not DoubleAck: an acknowledgement lost (or a server killed
		// before it stored it) only brings a copy back, which the
		// store suppresses.
		err = h.m.Ack()
	case adapter.Retry:
		// A delivery spent: the retry policy's.
		err = h.m.NakWithDelay(v.Delay)
	case adapter.Hold:
		// To the next consumer at once; waiting out the AckWait would
		// spend the delivery all the same, later.
		err = h.m.Nak()
	}
	if err != nil {
		r.log.WarnContext(ctx, "idemq: could not settle a message; it comes back after the AckWait",
			"subject", h.m.Subject(), "action", v.Action, "err", err)
	}
}
