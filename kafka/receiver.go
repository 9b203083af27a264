package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/internal/adapter"
)

// ReceiverConfig holds a [Receiver]'s optional settings. The zero value
// works.
type ReceiverConfig struct {
	// BatchSize bounds the records of one partition that go through the
	// Consumer together, their keys claimed and completed in one store
	// round trip each. Default 1. With more, a record that fails is
	// retried after the records behind it in its batch have run: they
	// keep their offsets back, but not their order against it.
	BatchSize int
	// MaxBuffered bounds the records of one partition fetched and not yet
	// handled: past it the partition's fetching pauses until its handler
	// has caught up by half. Default 500.
	MaxBuffered int
	// DrainTimeout bounds the drain that the end of [Receiver.Run]'s
	// context starts. Default 30s.
	DrainTimeout time.Duration
}

func (c *ReceiverConfig) setDefaults() {
	if c.BatchSize == 0 {
		c.BatchSize = 1
	}
	if c.MaxBuffered == 0 {
		c.MaxBuffered = 500
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 30 * time.Second
	}
}

func (c ReceiverConfig) validate() error {
	switch {
	case c.BatchSize < 1:
		return fmt.Errorf("kafka: batch size %d, want at least 1", c.BatchSize)
	case c.MaxBuffered < c.BatchSize:
		return fmt.Errorf("kafka: max buffered %d, want at least the batch size %d", c.MaxBuffered, c.BatchSize)
	case c.DrainTimeout <= 0:
		return fmt.Errorf("kafka: drain timeout %v must be positive", c.DrainTimeout)
	}
	return nil
}

// Receiver consumes a group's partitions through a [consumer.Consumer]: see
// the package doc for what it does with each record, a rebalance and a
// drain. It is safe for concurrent use.
type Receiver struct {
	c         *consumer.Consumer
	h         consumer.Handler
	cfg       ReceiverConfig
	cl        *kgo.Client
	log       *slog.Logger
	rebalance time.Duration // the group's rebalance timeout

	// base is the parent of the partitions' contexts; stop ends it once
	// the drain is over.
	base context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup // the partitions' goroutines

	mu       sync.Mutex
	parts    map[topicPartition]*partition
	draining bool
	ran      bool
	stopPoll context.CancelFunc // ends Run's poll loop
	polled   chan struct{}      // closed once the poll loop has returned

	drainOnce sync.Once
	drained   chan struct{}
	drainErr  error
}

type topicPartition struct {
	topic     string
	partition int32
}

// NewReceiver returns a Receiver that runs h, at most once per key,
// through c for the records of a group's partitions, on a client it makes
// from opts: they name the brokers (kgo.SeedBrokers), the group
// (kgo.ConsumerGroup) and its topics (kgo.ConsumeTopics), and whatever
// else the client needs. The Receiver adds its own: it commits only the
// offsets it marks (kgo.AutoCommitMarks; do not pass
// kgo.DisableAutoCommit), blocks rebalances while it hands out what a poll
// returned (kgo.BlockRebalanceOnPoll), and sets the
// OnPartitionsAssigned, OnPartitionsRevoked and OnPartitionsLost hooks;
// franz-go's log goes to c's logger at WARN and above ([NewLogger])
// unless opts hold a kgo.WithLogger. The client joins the group at once;
// call [Receiver.Run] to consume, and [Receiver.Drain] to stop, which
// closes the client.
func NewReceiver(c *consumer.Consumer, h consumer.Handler, cfg ReceiverConfig, opts ...kgo.Opt) (*Receiver, error) {
	if c == nil || h == nil {
		return nil, errors.New("kafka: NewReceiver: nil Consumer or Handler")
	}
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := &Receiver{c: c, h: h, cfg: cfg, log: adapter.Logger(c), parts: map[topicPartition]*partition{}, drained: make(chan struct{})}
	r.base, r.stop = context.WithCancel(context.Background())
	all := append([]kgo.Opt{kgo.WithLogger(NewLogger(r.log))}, opts...)
	all = append(all, kgo.AutoCommitMarks(), kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(r.assigned), kgo.OnPartitionsRevoked(r.revoked), kgo.OnPartitionsLost(r.lost))
	cl, err := kgo.NewClient(all...)
	if err != nil {
		r.stop()
		// franz-go refuses AutoCommitMarks without a group first.
		return nil, fmt.Errorf("kafka: NewReceiver (it needs kgo.ConsumerGroup and kgo.ConsumeTopics): %w", err)
	}
	group, _ := cl.OptValue(kgo.ConsumerGroup).(string)
	topics, _ := cl.OptValue(kgo.ConsumeTopics).([]string)
	if group == "" || len(topics) == 0 {
		cl.Close()
		r.stop()
		return nil, errors.New("kafka: NewReceiver: pass the group and its topics: kgo.ConsumerGroup(name), kgo.ConsumeTopics(topics...)")
	}
	r.cl = cl
	r.rebalance = cl.OptValue(kgo.RebalanceTimeout).(time.Duration)
	return r, nil
}

// errRan is Run's answer after it ran, or after a Drain: a misuse.
var errRan = errors.New("kafka: receiver already ran or drained")

// Run polls and hands each partition's records to its handler goroutine
// until ctx ends or [Receiver.Drain] is called. When ctx ends, Run drains
// within [ReceiverConfig.DrainTimeout] and returns what the drain
// returned; when Drain is called, Run returns what Drain returns, once it
// has.
func (r *Receiver) Run(ctx context.Context) error {
	r.mu.Lock()
	if r.ran || r.draining {
		r.mu.Unlock()
		return errRan
	}
	r.ran = true
	poll, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	r.stopPoll, r.polled = stopPoll, make(chan struct{})
	r.mu.Unlock()

	for poll.Err() == nil {
		fs := r.cl.PollFetches(poll)
		if fs.IsClientClosed() {
			break
		}
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				r.log.Warn("kafka: fetch", "topic", topic, "partition", p, "err", err)
			}
		})
		fs.EachPartition(r.dispatch)
		r.cl.AllowRebalance()
	}
	close(r.polled)
	if ctx.Err() != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.DrainTimeout)
		defer cancel()
		return r.Drain(dctx)
	}
	<-r.drained
	return r.drainErr
}

// dispatch queues a poll's records of one partition for its goroutine.
// Rebalances wait meanwhile (kgo.BlockRebalanceOnPoll), so the partition
// is still this member's.
func (r *Receiver) dispatch(p kgo.FetchTopicPartition) {
	if len(p.Records) == 0 {
		return
	}
	r.mu.Lock()
	w := r.parts[topicPartition{p.Topic, p.Partition}]
	r.mu.Unlock()
	if w == nil {
		return // not assigned: franz-go drops a revoked partition's buffer
	}
	w.add(p.Records)
}

// Drain stops the Receiver without cutting a running handler off between
// its effect and the record of it, within ctx: Run stops polling; no
// handler starts from now on; the running ones finish and record (when
// ctx ends first, their contexts are cancelled); the offsets of the
// acknowledged records are committed; the client leaves the group and
// closes, and the records held meanwhile go to the partitions' next
// owners. Drain returns once every partition goroutine has stopped; its
// error says whether handlers were still running when ctx ended, and what
// the commit answered. A second call waits for the first and returns what
// it returned.
func (r *Receiver) Drain(ctx context.Context) error {
	r.drainOnce.Do(func() {
		r.mu.Lock()
		r.draining = true
		stopPoll, polled := r.stopPoll, r.polled
		r.mu.Unlock()
		if stopPoll != nil {
			stopPoll()
			<-polled
		}
		r.drainErr = adapter.Drain(ctx, r.c, func() error {
			// The handlers have finished and their records are marked; a
			// commit is short, and worth a moment past a drain that ran out.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
			defer cancel()
			err := r.cl.CommitMarkedOffsets(cctx)
			if err != nil {
				err = fmt.Errorf("kafka: commit: %w", err)
			}
			r.cl.Close() // leaves the group; its revoke hook waits for nothing now
			return err
		})
		r.stop()
		r.wg.Wait()
		close(r.drained)
	})
	<-r.drained
	return r.drainErr
}

// commitTimeout bounds a commit on a revoke or a drain.
const commitTimeout = 10 * time.Second

// assigned starts a goroutine for each partition the group gives this
// member.
func (r *Receiver) assigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for topic, ps := range assigned {
		for _, p := range ps {
			tp := topicPartition{topic, p}
			if r.parts[tp] != nil {
				continue
			}
			w := newPartition(r, tp)
			r.parts[tp] = w
			r.wg.Go(w.run)
		}
	}
}

// revoked drains the partitions the group takes from this member before
// the rebalance goes on: their goroutines take no more records, a record
// waiting for a busy key, a store or a retry's delay is handed back at
// once (Held: not committed), a running handler has half the rebalance
// timeout to finish, and then its context is cancelled; then the offsets
// of the acknowledged records are committed, synchronously.
func (r *Receiver) revoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	r.release(ctx, cl, revoked, true)
}

// lost stops the goroutines of the partitions this member lost (its
// session ended, or it was fenced): nothing of theirs is committed, since
// their next owner may have gone past them.
func (r *Receiver) lost(ctx context.Context, cl *kgo.Client, lost map[string][]int32) {
	r.release(ctx, cl, lost, false)
}

func (r *Receiver) release(ctx context.Context, cl *kgo.Client, ps map[string][]int32, commit bool) {
	r.mu.Lock()
	var ws []*partition
	for topic, parts := range ps {
		for _, p := range parts {
			tp := topicPartition{topic, p}
			if w := r.parts[tp]; w != nil {
				ws = append(ws, w)
				delete(r.parts, tp)
			}
		}
	}
	draining := r.draining
	r.mu.Unlock()
	for _, w := range ws {
		w.revoke(cl, !commit)
	}
	// In a drain, handlers are waited for by the drain, and the goroutines
	// of held records return only once it has closed the client: waiting
	// for them here would hold the close up.
	if !draining {
		if !awaitAll(ws, r.rebalance/2) {
			for _, w := range ws {
				w.cancel()
			}
			if !awaitAll(ws, r.rebalance/4) {
				r.log.Error("kafka: handlers ignored their cancelled contexts past the rebalance; their records go to the partitions' next owners", "partitions", len(ws))
			}
		}
	}
	if !commit {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, min(commitTimeout, r.rebalance/4))
	defer cancel()
	if err := cl.CommitMarkedOffsets(cctx); err != nil {
		// Fenced (ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS …): the next
		// owner gets the records from the last commit, and the dedupe
		// store suppresses those that ran here.
		r.log.Warn("kafka: commit on revoke", "err", err)
	}
}

// awaitAll waits until every one of ws has stopped, at most d, and
// reports whether they did.
func awaitAll(ws []*partition, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for _, w := range ws {
		select {
		case <-w.done:
		case <-t.C:
			return false
		}
	}
	return true
}

// partition is the goroutine of one assigned partition and its queue of
// fetched records, which it runs in offset order.
type partition struct {
	r  *Receiver
	tp topicPartition
	// ctx is the handlers' context, ended by a revoke that waited long
	// enough, a loss, or the end of the drain.
	ctx    context.Context
	cancel context.CancelFunc
	// stopping is closed on a revoke or loss: no more records are taken,
	// and waits end.
	stopping chan struct{}
	done     chan struct{}
	more     chan struct{} // a record was queued
	wait     adapter.Waiting
	handle   consumer.Handler

	mu     sync.Mutex
	queue  []*kgo.Record
	paused bool
	// waiting says a record waits (for a busy key or the store), not runs.
	waiting bool
}

func newPartition(r *Receiver, tp topicPartition) *partition {
	w := &partition{r: r, tp: tp, stopping: make(chan struct{}), done: make(chan struct{}), more: make(chan struct{}, 1)}
	w.ctx, w.cancel = context.WithCancel(r.base)
	w.wait = adapter.Waiting{Always: true, System: "kafka", Extend: w.extend}
	w.handle = func(ctx context.Context, m *consumer.Message) error {
		w.mu.Lock()
		w.waiting = false
		w.mu.Unlock()
		return r.h(ctx, m)
	}
	return w
}

// extend is told that a record waits: a revoke under way ends the wait
// at once.
func (w *partition) extend(int, time.Duration) {
	w.mu.Lock()
	w.waiting = true
	w.mu.Unlock()
	select {
	case <-w.stopping:
		w.cancel()
	default:
	}
}

// revoke stops the partition's goroutine taking records and ends its
// waits; now, its handler's context too.
func (w *partition) revoke(cl *kgo.Client, now bool) {
	w.mu.Lock()
	close(w.stopping)
	if now || w.waiting {
		w.cancel()
	}
	if w.paused {
		// Pauses outlive assignments: a partition given back later must
		// fetch.
		cl.ResumeFetchPartitions(map[string][]int32{w.tp.topic: {w.tp.partition}})
		w.paused = false
	}
	w.mu.Unlock()
}

// add queues rs, and pauses the partition's fetching when the queue is
// full.
func (w *partition) add(rs []*kgo.Record) {
	w.mu.Lock()
	w.queue = append(w.queue, rs...)
	if len(w.queue) >= w.r.cfg.MaxBuffered && !w.paused {
		w.r.cl.PauseFetchPartitions(map[string][]int32{w.tp.topic: {w.tp.partition}})
		w.paused = true
	}
	w.mu.Unlock()
	select {
	case w.more <- struct{}{}:
	default:
	}
}

// take returns up to n queued records, waiting for one; nil once the
// partition is revoked or its context ends.
func (w *partition) take(n int) []*kgo.Record {
	for {
		select {
		case <-w.stopping:
			return nil
		case <-w.ctx.Done():
			return nil
		default:
		}
		w.mu.Lock()
		if len(w.queue) > 0 {
			n = min(n, len(w.queue))
			rs := make([]*kgo.Record, n)
			copy(rs, w.queue)
			clear(w.queue[:n])
			w.queue = w.queue[n:]
			if w.paused && len(w.queue) <= w.r.cfg.MaxBuffered/2 {
				w.r.cl.ResumeFetchPartitions(map[string][]int32{w.tp.topic: {w.tp.partition}})
				w.paused = false
			}
			w.mu.Unlock()
			return rs
		}
		w.mu.Unlock()
		select {
		case <-w.more:
		case <-w.stopping:
		case <-w.ctx.Done():
		}
	}
}

// run handles the partition's records in offset order. A record's offset
// is marked for commit once it, and every record before it, is
// acknowledged. A record to retry holds the partition: it runs again after
// its verdict's delay (the consumer's delay level of its attempt), and the
// records behind it wait. A held record (a drain, a revoke, a loss) ends
// the goroutine: it goes, uncommitted, to the partition's next owner.
func (w *partition) run() {
	defer close(w.done)
	defer w.cancel()
	var (
		pending []*kgo.Record
		tries   []int32 // in-process attempts before, per pending record
		msgs    []consumer.Message
		vs      []adapter.Verdict
	)
	for {
		if len(pending) == 0 {
			if pending = w.take(w.r.cfg.BatchSize); pending == nil {
				return
			}
			tries = append(tries[:0], make([]int32, len(pending))...)
		}
		msgs, vs = msgs[:0], vs[:0]
		for i, rec := range pending {
			msgs = append(msgs, message(rec, tries[i]))
			vs = append(vs, adapter.Verdict{})
		}
		vs = adapter.Process(w.ctx, w.r.c, msgs, w.handle, w.wait, vs)
		k := 0
		for k < len(vs) && vs[k].Action == adapter.Ack {
			k++
		}
		if k > 0 {
			w.r.cl.MarkCommitRecords(pending[k-1])
		}
		if k == len(pending) {
			pending = nil
			continue
		}
		if vs[k].Action == adapter.Hold {
			return
		}
		pending, tries = pending[k:], tries[k:]
		for i := range tries {
			if tries[i] < 1<<31-1 {
				tries[i]++
			}
		}
		if !w.sleep(vs[k].Delay) {
			return
		}
	}
}

// sleep waits d before a retry and reports whether the partition is still
// to be handled then.
func (w *partition) sleep(d time.Duration) bool {
	w.mu.Lock()
	w.waiting = true
	w.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-w.stopping:
	case <-w.ctx.Done():
	}
	return false
}

// message is rec as the Consumer reads it, delivered after tries attempts
// in this process: its headers are its properties.
func message(rec *kgo.Record, tries int32) consumer.Message {
	props := make(map[string]string, len(rec.Headers))
	for _, h := range rec.Headers {
		props[h.Key] = string(h.Value)
	}
	return consumer.Message{
		ID:         recordID(rec),
		Topic:      rec.Topic,
		Properties: props,
		Body:       rec.Value,
		Reconsumed: tries,
		Raw:        rec,
	}
}

// recordID names rec by where it is stored: topic/partition/offset. Every
// delivery of a stored record has the same ID, a fallback key for
// consumer.WithKeyFallback that dedupes redeliveries (not a record
// produced twice, which is stored twice).
func recordID(rec *kgo.Record) string {
	return rec.Topic + "/" + strconv.Itoa(int(rec.Partition)) + "/" + strconv.FormatInt(rec.Offset, 10)
}
