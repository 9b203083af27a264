package consumer

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/idemq/idemq/dedupe"
)

// Option configures [New].
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	namespace     string
	guard         dedupe.GuardConfig
	fallbacks     []func(*Message) string
	noFingerprint bool
	logger        *slog.Logger
	busyWait      time.Duration
	storeWait     time.Duration
	maxReconsume  int32
	delayLevels   []time.Duration
	telemetry     telemetryOptions
	// shortRetention lets the retention be shorter than the redelivery
	// horizon (see AcceptShortRetention).
	shortRetention bool
}

// defaultMaxReconsume is the clients' default: rocketmq-client-go's
// MaxReconsumeTimes for concurrently consuming push consumers, a 5.x
// group's retryMaxTimes.
const defaultMaxReconsume = 16

// defaultDelayLevels are the broker's default messageDelayLevel, levels 1
// to 18.
var defaultDelayLevels = []time.Duration{
	time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute,
	6 * time.Minute, 7 * time.Minute, 8 * time.Minute, 9 * time.Minute, 10 * time.Minute,
	20 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour,
}

func (o *options) validate() error {
	switch {
	case o.busyWait < 0:
		return fmt.Errorf("consumer: busy wait %v must not be negative", o.busyWait)
	case o.storeWait < 0:
		return fmt.Errorf("consumer: store-down wait %v must not be negative", o.storeWait)
	case o.maxReconsume < 1:
		return fmt.Errorf("consumer: max reconsume times %d must be at least 1 (the client's setting; -1, unlimited, is for orderly consumers, which always wait in process)", o.maxReconsume)
	case len(o.delayLevels) == 0:
		return fmt.Errorf("consumer: no delay levels; give the broker's messageDelayLevel")
	}
	for i, d := range o.delayLevels {
		if d <= 0 || i > 0 && d < o.delayLevels[i-1] {
			return fmt.Errorf("consumer: delay level %d is %v: levels must be positive and ascending, as the broker's messageDelayLevel", i+1, d)
		}
	}
	return nil
}

// WithNamespace separates this application's keys from others sharing the
// store. Default "".
func WithNamespace(ns string) Option { return optionFunc(func(o *options) { o.namespace = ns }) }

// WithGuard sets lease, retention, extension and fail-open behaviour; see
// [dedupe.GuardConfig] for the defaults.
func WithGuard(cfg dedupe.GuardConfig) Option { return optionFunc(func(o *options) { o.guard = cfg }) }

// WithKeyFallback names where to find a key when a message has no
// [msgkey.Property]: functions that return a message's key, or "" when it
// has none, tried in order. For example the client's unique key
// (remoting.UniqKey, grpcv5.UniqKey), then the message id
// (func(m *consumer.Message) string { return m.ID }; see [Message].ID).
// Default none: a message without a key is retried, never run without
// dedupe.
func WithKeyFallback(fs ...func(*Message) string) Option {
	return optionFunc(func(o *options) { o.fallbacks = append(o.fallbacks, fs...) })
}

// WithoutFingerprint turns the payload check off, so that a key reused for
// a different payload is suppressed as a duplicate.
//
// A key stands for one message: the same key with a different body is a
// mistake upstream (a business key reused, a key function that collides),
// and suppressing it as a duplicate would lose that body silently. So by
// default the [dedupe.Fingerprint] of each message body is recorded with
// its key, and a delivery whose key is recorded with another body's
// fingerprint is reused: the handler does not run, [Stats.Reused] counts
// it, an error is logged with the group and the key, and the message is
// retried like a failed one until the broker dead-letters it (not at once,
// so that a conflict only an older consumer reports during an upgrade
// reaches an upgraded one). A redelivery has the same body and is
// suppressed. The fingerprint is a checksum against accidents, not a
// security check. A store compares only fingerprints of one length (see
// [dedupe.Item]), so keys recorded by earlier versions, with a
// SHA-256 fingerprint or none, answer done or in flight as they would
// without the check.
//
// Turn it off only where the body of one message may change between
// sends, such as a timestamp stamped per attempt.
func WithoutFingerprint() Option { return optionFunc(func(o *options) { o.noFingerprint = true }) }

// WithLogger reports lost leases, unrecorded completions, reused keys,
// store failures and messages without keys. Default slog.Default().
func WithLogger(l *slog.Logger) Option { return optionFunc(func(o *options) { o.logger = l }) }

// WithBusyWait bounds how long one delivery waits in process for a key that
// another consumer holds, before it is handed back for a redelivery no
// sooner than the holder's lease ends (at the first delay level that
// covers it). Default: the lease
// ([dedupe.GuardConfig.Lease]), which a holder that died lets run out, so
// that by default a busy key is always waited for and never spends a
// reconsume. A shorter wait frees the handler goroutine sooner and costs a
// reconsume per redelivery; a message on its last reconsume (see
// [WithMaxReconsumeTimes]), or whose wait no delay level covers (see
// [WithDelayLevels]), is waited for regardless, so a busy key never sends a
// message to the dead-letter queue. An adapter whose client keeps the
// message in hand meanwhile (gRPC simple consumers, orderly consumers)
// always waits.
func WithBusyWait(d time.Duration) Option { return optionFunc(func(o *options) { o.busyWait = d }) }

// defaultStoreWait is the default of [WithStoreDownWait].
const defaultStoreWait = 10 * time.Minute

// WithStoreDownWait bounds how long one delivery waits in process for a
// dedupe store that is down (its claim failed: the store-down outcome)
// before it is handed back for a redelivery, which spends a reconsume.
// Default 10 minutes.
//
// While the store is down, a Consumer asks it again with one probe at a
// time, 50 ms after the failure and then twice as long after each failure
// up to every 5 s; the waiting messages, and those delivered meanwhile,
// do not call the store, and claim again as soon as the probe (or any
// claim) gets an answer. An outage that ends while a message waits spends
// nothing: the message runs, or is suppressed, in the same delivery. The
// outage is logged once when it begins and once when it ends, and counted
// in [Stats.Outages] and [Stats.StoreWaited].
//
// The default stays under how long a client lets a message wait in a
// callback without acting on its own: rocketmq-client-go sends a message back (a
// reconsume spent) once its callback has run for the push consumer's
// ConsumeTimeout (rmq.WithConsumeTimeout, 15 minutes by default), and a 5.x
// proxy renews a push consumer's message for 3 hours (its
// renewMaxTimeMillis) before it makes it visible again. Keep the wait under
// the consume timeout. As with a busy key, a message on its last reconsume
// (see [WithMaxReconsumeTimes]), and every message of an adapter that keeps
// it in hand (gRPC simple consumers, orderly consumers),
// waits for as long as the store is down, so an outage never sends a
// message to the dead-letter queue by itself — except that the remoting
// client, past its consume timeout, sends a message on its last reconsume
// there on its own, while this process still runs it once the store
// answers (a copy the dead-letter queue keeps; raise the consume timeout
// above the longest outage to be ridden out).
//
// So a remoting push consumer with MaxReconsumeTimes r rides out an outage
// of at least r × (wait + the broker's delay for the attempt) + its consume
// timeout without a message reaching the dead-letter queue: with the
// defaults (r = 16, delays of 10 s to 2 h) more than 7 hours; with r = 3
// and 1 s delay levels, more than 45 minutes. A drain, or the end of the
// delivery's context, stops the wait: the messages are held, as for a busy
// key. With [dedupe.GuardConfig.FailOpen] nothing waits: a claim that
// fails runs the handler unguarded.
func WithStoreDownWait(d time.Duration) Option {
	return optionFunc(func(o *options) { o.storeWait = d })
}

// WithMaxReconsumeTimes tells the Consumer the client's reconsume limit (a
// remoting push consumer's MaxReconsumeTimes, a 5.x group's retryMaxTimes;
// default 16, the clients' default): a message redelivered that many times
// goes to the dead-letter queue on its next failure, so a busy key, or a
// store that is down, on its last reconsume is waited for in process. With
// [WithDelayLevels] it sets the redelivery horizon that [New] holds the
// retention to (see the package doc's Retention section).
func WithMaxReconsumeTimes(n int32) Option {
	return optionFunc(func(o *options) { o.maxReconsume = n })
}

// WithDelayLevels tells the Consumer the broker's messageDelayLevel, level 1
// first (default: the broker's default, 1s 5s 10s 30s 1m … 2h). A busy key
// is redelivered at the first level no shorter than the holder's remaining
// lease; when none is, it is waited for in process. With
// [WithMaxReconsumeTimes] they set the redelivery horizon that [New] holds
// the retention to.
func WithDelayLevels(levels ...time.Duration) Option {
	return optionFunc(func(o *options) { o.delayLevels = append([]time.Duration(nil), levels...) })
}
