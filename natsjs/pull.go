package natsjs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/internal/adapter"
)

// PullConfig holds a [Receiver]'s optional settings. The zero value works.
type PullConfig struct {
	// Workers bounds the goroutines that run messages through the Consumer
	// at once. Default 20.
	Workers int
	// BatchSize bounds the messages one goroutine runs through the
	// Consumer together, claiming and completing their keys in one store
	// round trip each: those of one pull that arrived together. At most
	// Workers × BatchSize messages run at once, and as many again wait in
	// hand for a free goroutine, so that one pull brings at least that
	// many; the JetStream consumer's MaxAckPending should be no lower than
	// Workers × BatchSize. Default 1.
	BatchSize int
	// PollWait is how long one pull request waits for messages (its
	// expiry). It bounds how long a drain waits for the pull under way,
	// whose messages are handed back at once. Default 2s.
	PollWait time.Duration
	// DrainTimeout bounds how long [Receiver.Run], once stopped, waits
	// for the handlers running then; past it their contexts are cancelled.
	// Default 30s.
	DrainTimeout time.Duration
}

func (c *PullConfig) setDefaults() {
	if c.Workers == 0 {
		c.Workers = 20
	}
	if c.BatchSize == 0 {
		c.BatchSize = 1
	}
	if c.PollWait == 0 {
		c.PollWait = 2 * time.Second
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 30 * time.Second
	}
}

// validate reports settings that cannot work.
func (c PullConfig) validate() error {
	switch {
	case c.Workers < 1:
		return fmt.Errorf("natsjs: %d workers, want at least 1", c.Workers)
	case c.BatchSize < 1:
		return fmt.Errorf("natsjs: batch size %d, want at least 1", c.BatchSize)
	case c.PollWait < time.Millisecond:
		return fmt.Errorf("natsjs: poll wait %v, want at least 1ms", c.PollWait)
	case c.DrainTimeout <= 0:
		return fmt.Errorf("natsjs: drain timeout %v must be positive", c.DrainTimeout)
	}
	return nil
}

// errClosed is Run's answer after Close, or a second time: a misuse.
var errClosed = errors.New("natsjs: receiver closed")

// Receiver runs a pull loop on a JetStream pull consumer: it fetches
// messages, runs them through the [consumer.Consumer] in up to
// [PullConfig.Workers] goroutines, and acknowledges, naks or hands back
// each as the Consumer decides:
//
//   - done (run, or a suppressed duplicate): Ack;
//   - failed: NakWithDelay, the delay of its attempt (consumer.WithDelayLevels):
//     a delivery spent, as the retry policy means;
//   - held by a drain: Nak, so that another consumer of the JetStream
//     consumer takes it at once.
//
// A message in hand never goes back to the server for waiting: while its
// handler runs, while its key is busy with another consumer, and while
// the dedupe store is down, however long that lasts, it is kept with
// InProgress every third of the consumer's AckWait, which spends no
// delivery (MaxDeliver). Only a failure and a drain's hand-back spend
// one. Should this process die, the server redelivers what it had in hand
// after AckWait, which spends one too.
//
// A Receiver drains its Consumer: use one Consumer per Receiver. It is
// safe for concurrent use.
type Receiver struct {
	c       *consumer.Consumer
	jc      jetstream.Consumer
	h       consumer.Handler
	cfg     PullConfig
	ackWait time.Duration
	// maxPull is the consumer's MaxRequestBatch: the most messages one
	// pull may ask for (0: no limit), past which the server refuses it.
	maxPull int
	log     *slog.Logger

	mu     sync.Mutex
	state  runState
	cancel context.CancelFunc // ends the running loop
	done   chan struct{}      // closed once run has returned
	err    error              // what run returned
	hands  map[*hand]struct{}
}

type runState uint8

const (
	idle runState = iota
	running
	closed
)

// Pull returns a Receiver that runs h for the messages of jc, a pull
// consumer, at most once per key, through c. Call [Receiver.Run] to start
// it. jc must acknowledge explicitly (jetstream.AckExplicitPolicy, the
// default): with AckAll, acknowledging one message would acknowledge the
// failed ones before it. Its MaxDeliver should be c's max reconsume times
// plus one (consumer.WithMaxReconsumeTimes), and its AckWait is what
// InProgress renews.
func Pull(c *consumer.Consumer, jc jetstream.Consumer, h consumer.Handler, cfg PullConfig) (*Receiver, error) {
	if c == nil || jc == nil || h == nil {
		return nil, errors.New("natsjs: Pull: nil Consumer, jetstream.Consumer or Handler")
	}
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	info := jc.CachedInfo()
	if info == nil {
		return nil, errors.New("natsjs: Pull: the jetstream.Consumer has no info")
	}
	if p := info.Config.AckPolicy; p != jetstream.AckExplicitPolicy {
		return nil, fmt.Errorf("natsjs: Pull: consumer %s acknowledges with %v; want explicit", info.Name, p)
	}
	return &Receiver{c: c, jc: jc, h: h, cfg: cfg, ackWait: ackWait(info.Config), maxPull: info.Config.MaxRequestBatch, log: adapter.Logger(c),
		done: make(chan struct{}), hands: map[*hand]struct{}{}}, nil
}

// ackWait is the shortest time the server waits for an acknowledgement
// before it redelivers: AckWait, or a BackOff step (which replaces
// AckWait for the delivery it is of).
func ackWait(cfg jetstream.ConsumerConfig) time.Duration {
	d := cfg.AckWait
	if d <= 0 {
		d = 30 * time.Second // the server's default
	}
	for _, b := range cfg.BackOff {
		if b > 0 {
			d = min(d, b)
		}
	}
	return d
}

// Run pulls and handles messages until ctx ends or Close is called, then
// drains: it pulls no more, hands back (Nak) what waits for a goroutine
// and what the pull under way (at most [PullConfig.PollWait]) and the
// waits for busy keys still bring, as soon as that pull ends, lets the
// running handlers finish and record their keys, within
// [PullConfig.DrainTimeout], and returns. Past the timeout the handlers'
// contexts are cancelled and its error wraps context.DeadlineExceeded.
// It also fails when Run ran before. The caller closes the connection
// afterwards (nc.Drain or nc.Close), which sends the last
// acknowledgements.
func (r *Receiver) Run(ctx context.Context) error {
	r.mu.Lock()
	if r.state != idle {
		r.mu.Unlock()
		return errClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.state, r.cancel = running, cancel
	r.mu.Unlock()

	err := r.loop(ctx)
	r.mu.Lock()
	r.state, r.err = closed, err
	r.mu.Unlock()
	close(r.done)
	return err
}

// Close stops Run, waits until it has drained and returns what it
// returned (nil if Run never ran); afterwards Run fails at once.
func (r *Receiver) Close() error {
	r.mu.Lock()
	switch r.state {
	case idle:
		r.state = closed
		close(r.done)
	case running:
		r.cancel()
	}
	r.mu.Unlock()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// fetchBackoff is the pause after a failed pull.
const fetchBackoff = time.Second

// loop pulls until ctx ends, then drains.
func (r *Receiver) loop(ctx context.Context) error {
	renewing, renewed := make(chan struct{}), make(chan struct{})
	go r.renew(renewing, renewed)
	defer func() {
		close(renewing)
		<-renewed
	}()
	// The handlers' context outlives ctx: the drain waits for them, and
	// cancels them (through the Consumer) when it runs out of time.
	work := context.WithoutCancel(ctx)
	slots := make(chan struct{}, 2*r.cfg.Workers*r.cfg.BatchSize)
	// Every group queued holds a slot per message, so a send never blocks.
	queue := make(chan []*hand, cap(slots))
	// Long-lived goroutines, rather than one per batch: a new goroutine's
	// stack grows anew down the store's and the client's calls, which cost
	// a tenth of the CPU at one message per batch.
	var wg sync.WaitGroup
	for range r.cfg.Workers {
		wg.Go(func() {
			for hs := range queue {
				r.handle(work, hs)
				for range hs {
					<-slots
				}
			}
		})
	}
	pulled := make(chan struct{})
	go func() {
		defer close(pulled)
		defer close(queue)
		r.pull(ctx, slots, queue)
	}()
	<-ctx.Done()
	// The drain starts now, with the pull under way: what it brings, and
	// what waits in the queue, is held and handed back.
	dctx, cancel := context.WithTimeout(work, r.cfg.DrainTimeout)
	defer cancel()
	err := adapter.Drain(dctx, r.c, func() error {
		<-pulled
		return nil
	})
	// The held messages are handed back now, and the handlers the drain
	// timed out on return, their contexts cancelled.
	wg.Wait()
	return err
}

// pull fetches messages while ctx lasts, taking a slot of slots for each
// message it asks for, and queues them in groups for the goroutines that
// run them, which free their slots. It asks only once half the slots are
// free, for all that are (within the consumer's MaxRequestBatch): at one
// message per batch, a pull for as many messages as goroutines had just
// finished brought seven on average, and each pull (a subscription, a
// request and an unsubscription) cost the server more than the messages
// it brought. The messages waiting for a goroutine are in hand, kept by
// renew like those running.
func (r *Receiver) pull(ctx context.Context, slots chan struct{}, queue chan<- []*hand) {
	free := func(n int) {
		for range n {
			<-slots
		}
	}
	most := cap(slots)
	if r.maxPull > 0 {
		most = min(most, r.maxPull)
	}
	least := min(cap(slots)/2, most)
	for ctx.Err() == nil {
		n := 0
		for n < least && ctx.Err() == nil {
			select {
			case slots <- struct{}{}:
				n++
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			free(n)
			return
		}
		for n < most && len(slots) < cap(slots) {
			slots <- struct{}{}
			n++
		}
		// Not cancelled with ctx: a message the server sends for the pull
		// after it was cancelled would come back only after AckWait.
		batch, err := r.jc.Fetch(n, jetstream.FetchMaxWait(r.cfg.PollWait))
		if err != nil {
			free(n)
			r.log.WarnContext(ctx, "idemq: pull failed; trying again", "err", err, "after", fetchBackoff)
			sleep(ctx, fetchBackoff)
			continue
		}
		got := 0
		for group := range r.groups(batch.Messages()) {
			got += len(group)
			queue <- r.take(group)
		}
		free(n - got)
		if err := batch.Error(); err != nil && ctx.Err() == nil {
			r.log.WarnContext(ctx, "idemq: pull failed; trying again", "err", err, "after", fetchBackoff)
			sleep(ctx, fetchBackoff)
		}
	}
}

// groups yields the messages of ch in groups of up to BatchSize: each
// with those that had arrived with its first.
func (r *Receiver) groups(ch <-chan jetstream.Msg) func(yield func([]jetstream.Msg) bool) {
	return func(yield func([]jetstream.Msg) bool) {
		for m := range ch {
			group := []jetstream.Msg{m}
		more:
			for len(group) < r.cfg.BatchSize {
				select {
				case m, ok := <-ch:
					if !ok {
						break more
					}
					group = append(group, m)
				default:
					break more
				}
			}
			if !yield(group) {
				return
			}
		}
	}
}

// sleep waits for d or the end of ctx.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// handle runs hs' messages through the Consumer and does what it decided.
func (r *Receiver) handle(ctx context.Context, hs []*hand) {
	defer r.drop(hs)
	msgs := make([]consumer.Message, len(hs))
	for i, h := range hs {
		msgs[i] = describe(h.m)
	}
	// In hand, kept by renew, a message costs nothing: wait for a busy
	// key, or a store that is down, however long.
	vs := adapter.Process(ctx, r.c, msgs, r.h, adapter.Waiting{Always: true, System: "nats"}, nil)
	for i, v := range vs {
		r.settle(ctx, hs[i], v)
	}
}
