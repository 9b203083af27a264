package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/adapter"
	"github.com/idemq/idemq/internal/dedupekit"
)

// Handler processes one message. A nil error acknowledges it; any error
// asks for a redelivery. It must not acknowledge the message itself.
type Handler func(ctx context.Context, msg *Message) error

// Consumer runs handlers at most once per (consumer group, message key) on
// top of a [dedupe.Store]: the one entry point of the receiving side. The
// client adapters (packages remoting and grpcv5) run every delivered
// message through it, and drain it when the client stops; [Consumer.Tx]
// makes it run handlers that write through a SQL transaction.
// It is safe for concurrent use.
type Consumer struct {
	options
	group string
	store dedupe.Store // as given, for the outage probe and Tx
	obs   *observer
	stats counters
	// mode is the guard's mode, decided once (see guard): modeUnset until
	// the first message or the first call of Tx.
	mode  atomic.Int32
	plain *dedupe.Guard // over store with group commit
	txg   *dedupe.Guard // the transactional guard, set by Tx before mode
	txMu  sync.Mutex    // serializes Tx
	// outage is what the Consumer knows of its store being down (see
	// outage.go); probe is the ticket its probe asks the store about.
	outage outage
	probe  dedupe.Ticket
	// strings holds the messages' fingerprints, which the store may keep
	// as long as their records: one allocation per 256 messages.
	strings dedupekit.Strings

	// Draining: running counts calls of process under way; once draining
	// is set none starts a handler, and held calls wait for shut.
	running  atomic.Int64
	idle     chan struct{} // signalled when running drops to 0 while draining
	draining atomic.Bool
	drain    chan struct{} // closed when draining starts
	shut     chan struct{} // closed once the drained client is stopped
}

// New returns a Consumer for the consumer group group that records keys in
// store. The claims and completions of handlers running at the same time
// share store round trips ([dedupe.GuardConfig.GroupCommit]).
//
// Keys are scoped to the group: two groups that consume one topic each
// process every message once. In broadcasting mode, where every instance
// must process every message, give each instance its own group name or
// namespace ([WithNamespace]).
//
// New refuses a retention ([dedupe.GuardConfig.Retention]) shorter than
// the group's redelivery horizon, unless given [AcceptShortRetention]; see
// the package doc's Retention section.
func New(store dedupe.Store, group string, opts ...Option) (*Consumer, error) {
	if store == nil {
		return nil, errors.New("consumer: nil store")
	}
	o := options{
		logger:       slog.Default(),
		maxReconsume: defaultMaxReconsume,
		delayLevels:  defaultDelayLevels,
	}
	for _, opt := range opts {
		opt.apply(&o)
	}
	probe := dedupe.Ticket{Ref: dedupe.Ref{Namespace: o.namespace, Group: group, Key: probeKey}, Token: probeToken}
	if err := dedupekit.CheckRef(probe.Namespace, probe.Group, probe.Key); err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	if o.guard.Tx {
		// One place sets the mode: the guard's mode would otherwise
		// depend on which of two settings a reader finds first.
		return nil, errors.New("consumer: dedupe.GuardConfig.Tx is set by Consumer.Tx, which makes a handler that writes through the transaction")
	}
	cfg := o.guard
	cfg.GroupCommit = true
	var c *Consumer
	if _, ok := store.(dedupe.CompleteClaimer); ok {
		// Completions are deferred, to ride with the next claim; the one
		// that fails later is counted and logged by c, made below. Not on
		// other stores: there a deferred completion takes a round trip of
		// its own all the same, which on a host short of CPU costs as much
		// in parallel as in series (redisdedupe measured no gain), while it
		// widens the crash window, and on memdedupe it costs a goroutine
		// handoff per message.
		cfg.LateFailure = func(ref dedupe.Ref, r dedupe.Result) { c.lateFailure(ref, r) }
	}
	guard, err := dedupe.NewGuard(store, cfg)
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	if o.busyWait == 0 {
		o.busyWait = guard.Config().Lease
	}
	if o.storeWait == 0 {
		o.storeWait = defaultStoreWait
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	if err := o.checkRetention(guard.Config().Retention); err != nil {
		return nil, err
	}
	obs, err := newObserver(o.telemetry, group)
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	c = &Consumer{
		options: o, group: group, store: store, plain: guard, obs: obs, probe: probe,
		idle: make(chan struct{}, 1), drain: make(chan struct{}), shut: make(chan struct{}),
	}
	return c, nil
}

// The modes of a Consumer's guard.
const (
	modeUnset int32 = iota
	modePlain       // claims with leases, concurrent claims coalesced
	modeTx          // claims in each message's transaction (Consumer.Tx)
)

// guard returns the Consumer's guard, deciding its mode for good if it is
// not yet: transactional once [Consumer.Tx] made a handler, plain from the
// first message on otherwise.
func (c *Consumer) guard() *dedupe.Guard {
	if c.mode.Load() == modeUnset {
		c.mode.CompareAndSwap(modeUnset, modePlain)
	}
	if c.mode.Load() == modeTx {
		return c.txg
	}
	return c.plain
}

// log is the Consumer's logger, for the adapters ([adapter.Logger]).
func (c *Consumer) log() *slog.Logger { return c.logger }

// The adapters' way in: see package internal/adapter.
var _ = adapter.Connect(
	func(c *Consumer, ctx context.Context, msgs []Message, h func(context.Context, *Message) error, w adapter.Waiting, vs []adapter.Verdict) []adapter.Verdict {
		if vs == nil {
			vs = make([]adapter.Verdict, len(msgs))
		}
		c.process(ctx, msgs, h, w, vs)
		return vs
	},
	(*Consumer).drainClient, (*Consumer).log)

// PanicError is a recovered handler panic.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("consumer: handler panicked: %v", e.Value) }

// safeRun runs run(ctx, i), a panic recovered as a [PanicError].
func safeRun(ctx context.Context, run func(context.Context, int) error, i int) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return run(ctx, i)
}
