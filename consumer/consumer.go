package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/dedupekit"
)

// Handler processes one message. A nil error acknowledges it; any error
// asks for a redelivery. It must not acknowledge the message itself.
type Handler func(ctx context.Context, msg *Message) error

// Consumer runs handlers at most once per (consumer group, message key) on
// top of a [dedupe.Store]: the one entry point of the receiving side. The
// client adapters run every delivered message through [Consumer.Process];
// [WithTx] and [Consumer.Tx] run handlers that write through a SQL
// transaction, and [Consumer.Drain] stops a client without cutting off a
// running handler.
// It is safe for concurrent use.
type Consumer struct {
	options
	group string
	store dedupe.Store // as given, for the outage probe
	guard *dedupe.Guard
	obs   *observer
	// outage is what the Consumer knows of its store being down (see
	// outage.go); probe is the ticket its probe asks the store about.
	outage outage
	probe  dedupe.Ticket

	// Draining: running counts calls of Process under way; once draining
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
		stats:        new(Stats),
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
	guard, err := newGuard(store, o)
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
	return &Consumer{
		options: o, group: group, store: store, guard: guard, obs: obs, probe: probe,
		idle: make(chan struct{}, 1), drain: make(chan struct{}), shut: make(chan struct{}),
	}, nil
}

// newGuard returns the guard of a Consumer over store with o: in the
// transactional mode ([WithTx]), else with its concurrent calls coalesced
// ([dedupe.GuardConfig.GroupCommit]).
func newGuard(store dedupe.Store, o options) (*dedupe.Guard, error) {
	cfg := o.guard
	if o.tx {
		cfg.Tx = true
		g, err := dedupe.NewGuard(store, cfg)
		if err != nil {
			return nil, fmt.Errorf("WithTx: %w", err)
		}
		return g, nil
	}
	cfg.GroupCommit = true
	return dedupe.NewGuard(store, cfg)
}

// Stats returns the counters the Consumer updates (those given with
// [WithStats], or its own).
func (c *Consumer) Stats() *Stats { return c.stats }

// Logger returns the logger given with [WithLogger], or slog.Default():
// a client adapter reports through it what it does besides
// [Consumer.Process], such as a failed receive or acknowledgement.
func (c *Consumer) Logger() *slog.Logger { return c.logger }

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
