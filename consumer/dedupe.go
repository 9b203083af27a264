package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/dedupe"
)

// Option configures [Dedupe] and [DedupeBatch].
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	namespace     string
	guard         dedupe.GuardConfig
	fallbacks     []KeyFunc
	noFingerprint bool
	stats         *Stats
	logger        *slog.Logger
}

// WithNamespace separates this application's keys from others sharing the
// store. Default "".
func WithNamespace(ns string) Option { return optionFunc(func(o *options) { o.namespace = ns }) }

// WithGuard sets lease, retention, extension and fail-open behaviour; see
// [dedupe.GuardConfig] for the defaults.
func WithGuard(cfg dedupe.GuardConfig) Option { return optionFunc(func(o *options) { o.guard = cfg }) }

// WithKeyFallback names where to find a key when a message has no
// [producer.KeyProperty], tried in order: for example [UniqKey], then
// [MsgID]. Default none: a message without a key is retried, never run
// without dedupe.
func WithKeyFallback(fs ...KeyFunc) Option {
	return optionFunc(func(o *options) { o.fallbacks = append(o.fallbacks, fs...) })
}

// WithoutFingerprint turns the payload check off, so that a key reused for
// a different payload is suppressed as a duplicate. By default the
// [dedupe.Fingerprint] of each message body is recorded with its key, and a
// key reused for another body is a conflict (see "Reused keys" in the
// package documentation). Turn it off only where the body of one message may
// change between sends, such as a timestamp stamped per attempt.
func WithoutFingerprint() Option { return optionFunc(func(o *options) { o.noFingerprint = true }) }

// WithStats counts what the middleware does into s.
func WithStats(s *Stats) Option { return optionFunc(func(o *options) { o.stats = s }) }

// WithLogger reports lost leases, unrecorded completions and messages
// without keys. Default slog.Default().
func WithLogger(l *slog.Logger) Option { return optionFunc(func(o *options) { o.logger = l }) }

// Dedupe returns middleware that runs the next handler at most once per
// (group, key) using store, and not at all for a key reused with another
// payload. group is the consumer group the handler runs in.
func Dedupe(store dedupe.Store, group string, opts ...Option) (Middleware, error) {
	d, err := newDeduper(store, group, opts)
	if err != nil {
		return nil, err
	}
	return func(next Handler) Handler {
		return func(ctx context.Context, msg *primitive.MessageExt) error {
			it, err := d.item(ctx, msg)
			if err != nil {
				return err
			}
			outcome, err := d.guard.Do(ctx, it.Ref, it.Fingerprint, func(ctx context.Context) error {
				return safeCall(ctx, next, msg)
			})
			return d.settle(ctx, it.Ref, outcome, err)
		}
	}, nil
}

// deduper is what [Dedupe] and [DedupeBatch] share.
type deduper struct {
	options
	group string
	guard *dedupe.Guard
	keyOf func(*primitive.MessageExt) (string, error)
}

func newDeduper(store dedupe.Store, group string, opts []Option) (*deduper, error) {
	o := options{logger: slog.Default(), stats: new(Stats)}
	for _, opt := range opts {
		opt.apply(&o)
	}
	probe := dedupe.Ref{Namespace: o.namespace, Group: group, Key: "probe"}
	if err := probe.Validate(); err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	guard, err := dedupe.NewGuard(store, o.guard)
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	return &deduper{options: o, group: group, guard: guard, keyOf: keyFunc(o.fallbacks)}, nil
}

// item counts msg as delivered and returns what to claim for it, or, when
// msg has no usable key, the error that has it retried.
func (d *deduper) item(ctx context.Context, msg *primitive.MessageExt) (dedupe.BatchItem, error) {
	d.stats.Delivered.Add(1)
	key, err := d.keyOf(msg)
	if err != nil {
		d.stats.NoKey.Add(1)
		d.logger.ErrorContext(ctx, "idemq: message without a usable key; retrying it",
			"group", d.group, "msgId", msg.MsgId, "topic", msg.Topic, "err", err)
		return dedupe.BatchItem{}, err
	}
	it := dedupe.BatchItem{Ref: dedupe.Ref{Namespace: d.namespace, Group: d.group, Key: key}}
	if !d.noFingerprint {
		it.Fingerprint = dedupe.Fingerprint(msg.Body)
	}
	return it, nil
}

// settle counts the outcome and decides: nil acknowledges the message.
func (o *options) settle(ctx context.Context, ref dedupe.Ref, outcome dedupe.Outcome, err error) error {
	s := o.stats
	switch {
	case outcome == dedupe.Suppressed:
		s.Suppressed.Add(1)
		return nil
	case err == nil:
		if outcome == dedupe.Unguarded {
			s.Unguarded.Add(1)
		}
		s.Completed.Add(1)
		return nil
	case errors.Is(err, dedupe.ErrLeaseLost):
		// The effect ran; another consumer may have run it too. A retry
		// cannot undo that, so acknowledge and make it loud.
		s.LeaseLost.Add(1)
		o.logger.ErrorContext(ctx, "idemq: lease lost while the handler ran; its effect may have been applied twice",
			"ref", ref.String(), "err", err)
		return nil
	case errors.Is(err, dedupe.ErrUnrecorded):
		// Retrying would run the effect again once the lease expires.
		s.Unrecorded.Add(1)
		o.logger.ErrorContext(ctx, "idemq: handler succeeded but the store did not record it",
			"ref", ref.String(), "err", err)
		return nil
	case outcome == dedupe.Ran, outcome == dedupe.Unguarded:
		s.Failed.Add(1)
		return err
	case errors.Is(err, dedupe.ErrInvalidKey):
		s.NoKey.Add(1)
		o.logger.ErrorContext(ctx, "idemq: message key cannot be deduplicated; retrying it", "ref", ref.String(), "err", err)
		return err
	case errors.Is(err, dedupe.ErrInFlight):
		s.InFlight.Add(1)
		return err
	case errors.Is(err, dedupe.ErrConflict):
		s.Conflicts.Add(1)
		o.logger.ErrorContext(ctx, "idemq: key reused for a different payload; not running the message, retrying it until the broker dead-letters it",
			"group", ref.Group, "key", ref.Key,
			"fix", "give each payload its own key, or consumer.WithoutFingerprint() if one message's body changes between sends")
		return err
	default:
		s.StoreErrors.Add(1)
		o.logger.WarnContext(ctx, "idemq: dedupe store failed; retrying the message", "ref", ref.String(), "err", err)
		return err
	}
}
