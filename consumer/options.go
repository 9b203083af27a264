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
	fallbacks     []KeyFunc
	noFingerprint bool
	stats         *Stats
	logger        *slog.Logger
	busyWait      time.Duration
	maxReconsume  int32
	delayLevels   []time.Duration
	suspend       time.Duration
	telemetry     telemetryOptions
}

// defaultMaxReconsume is rocketmq-client-go's default MaxReconsumeTimes for
// concurrently consuming push consumers.
const defaultMaxReconsume = 16

// defaultDelayLevels are the broker's default messageDelayLevel, levels 1
// to 18.
var defaultDelayLevels = []time.Duration{
	time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute,
	6 * time.Minute, 7 * time.Minute, 8 * time.Minute, 9 * time.Minute, 10 * time.Minute,
	20 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour,
}

// MinSuspend is the shortest queue suspension [Consumer.Orderly] applies: a
// zero suspension would retry at once, in a tight loop against a failing
// store.
const MinSuspend = 100 * time.Millisecond

func (o *options) validate() error {
	switch {
	case o.busyWait < 0:
		return fmt.Errorf("consumer: busy wait %v must not be negative", o.busyWait)
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
// [msgkey.Property], tried in order: for example [UniqKey], then [MsgID].
// Default none: a message without a key is retried, never run without
// dedupe.
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

// WithStats counts what the Consumer does into s. Default: a Stats of its
// own, which [Consumer.Stats] returns.
func WithStats(s *Stats) Option { return optionFunc(func(o *options) { o.stats = s }) }

// WithLogger reports lost leases, unrecorded completions, reused keys,
// store failures and messages without keys. Default slog.Default().
func WithLogger(l *slog.Logger) Option { return optionFunc(func(o *options) { o.logger = l }) }

// WithBusyWait bounds how long one delivery waits in process for a key that
// another consumer holds, before [Consumer.Concurrently] hands it back for
// a redelivery no sooner than the holder's lease ends. Default: the lease
// ([dedupe.GuardConfig.Lease]), which a holder that died lets run out, so
// that by default a busy key is always waited for and never spends a
// reconsume. A shorter wait frees the handler goroutine sooner and costs a
// reconsume per redelivery; a message on its last reconsume (see
// [WithMaxReconsumeTimes]), or whose wait no delay level covers (see
// [WithDelayLevels]), is waited for regardless, so a busy key never sends a
// message to the dead-letter queue. Orderly consumers always wait.
func WithBusyWait(d time.Duration) Option { return optionFunc(func(o *options) { o.busyWait = d }) }

// WithMaxReconsumeTimes tells the Consumer the push consumer's
// rmq.WithMaxReconsumeTimes (default 16, the client's default): a message
// redelivered that many times goes to the dead-letter queue on its next
// failure, so a busy key on its last reconsume is waited for in process.
func WithMaxReconsumeTimes(n int32) Option {
	return optionFunc(func(o *options) { o.maxReconsume = n })
}

// WithDelayLevels tells the Consumer the broker's messageDelayLevel, level 1
// first (default: the broker's default, 1s 5s 10s 30s 1m … 2h). A busy key
// is redelivered at the first level no shorter than the holder's remaining
// lease; when none is, it is waited for in process.
func WithDelayLevels(levels ...time.Duration) Option {
	return optionFunc(func(o *options) { o.delayLevels = append([]time.Duration(nil), levels...) })
}

// WithSuspend sets how long [Consumer.Orderly] suspends a queue whose
// message failed, at least [MinSuspend]. Default 1s.
func WithSuspend(d time.Duration) Option {
	return optionFunc(func(o *options) { o.suspend = max(d, MinSuspend) })
}
