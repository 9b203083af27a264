// Package consumer makes RocketMQ push-consumer handlers idempotent.
//
// A [Handler] processes one message. [Dedupe] wraps it so that a message's
// key (stamped by package producer) is claimed in a [dedupe.Store] before the
// handler runs, completed after it succeeds and released when it fails.
// [Concurrently] and [Orderly] turn the wrapped handler into the callback a
// rocketmq.PushConsumer subscribes with:
//
//	dd, err := consumer.Dedupe(store, "order-service")
//	...
//	c.Subscribe("orders", consumer.MessageSelector{}, consumer.Concurrently(dd(handle)))
//
// # Delivery semantics
//
// Per (consumer group, key), whatever the broker does:
//
//   - a key already done is acknowledged without running the handler;
//   - a key held by another consumer's live lease is retried later;
//   - a key done or held with another payload is not run; the message is
//     retried later and reported (see "Reused keys");
//   - a handler error releases the claim and the message is retried later,
//     so the redelivery runs at once: nothing is lost;
//   - success completes the key, then the message is acknowledged.
//
// # Batches
//
// When the push consumer delivers several messages at once
// (consumer.WithConsumeMessageBatchMaxSize), [DedupeBatch] claims all their
// keys in one store round trip, runs the handler for each acquired message,
// then completes the successes in one round trip and releases the failures
// in another. If any message must be retried the whole batch is, as the
// client resends every message of a failed batch; those already completed
// are suppressed on redelivery.
//
// # Keys and groups
//
// A message without a key is never passed through silently: it is retried
// (and reaches the dead-letter queue after the broker's retries) unless a
// fallback key was configured with [WithKeyFallback].
//
// The scope is the consumer group: in the default clustering mode each
// group processes each message once. In broadcasting mode every instance of
// a group must process every message, so give each instance its own scope
// (for example group + "/" + instance name) — and note that the client drops
// a failed broadcast message instead of retrying it.
//
// Failure paths return ConsumeRetryLater explicitly: in rocketmq-client-go
// ConsumeSuccess is the zero value, so a bare error return would acknowledge.
//
// # Reused keys
//
// A key stands for one message: the same key with a different body is a
// mistake upstream (a business key reused, a key function that collides),
// and suppressing it as a duplicate would lose that body silently. So the
// [dedupe.Fingerprint] of each message body is recorded with its key, and a
// delivery whose key is recorded with another body's fingerprint is a
// conflict: the handler does not run, [Stats.Conflicts] counts it, an error
// is logged with the group and the key, and the message is retried like any
// deferred one until it reaches the dead-letter queue after the broker's
// retries (an orderly consumer holds its queue until the reconsume limit;
// see [Orderly]). It is not dead-lettered at once so that a conflict only an
// older consumer reports during an upgrade (below) reaches an upgraded one.
// A redelivery has the same body and is suppressed. [WithoutFingerprint]
// turns the check off, for messages whose body changes between sends.
//
// The fingerprint is a checksum against accidents, not a security check.
// Earlier versions recorded a 64-digit SHA-256 fingerprint, and only with
// the option WithFingerprint. A store compares only fingerprints of one
// length, that is of one kind (see [dedupe.ClaimRequest]), so a key they
// recorded answers done or in flight as it would without the check: a
// redelivery across the upgrade is suppressed, and a key reused across it
// goes unnoticed. While both versions run, an older consumer with
// WithFingerprint reports the newer records as conflicts and retries them;
// an upgraded consumer then suppresses them.
//
// # Exactly-once effects with SQL
//
// Dedupe applies a handler's effect once per key unless something fails
// between the effect and the store's record of it: a crash there, or a lease
// lost while the handler ran (reported as [Stats.LeaseLost]), can apply it
// twice. When the effects are rows in the SQL database that also holds the
// dedupe records, [DedupeTx] closes that gap: the [TxHandler] writes through
// a transaction, and the record that its key is done is written in the same
// transaction, so both commit or neither does.
//
//	store, err := sqldedupe.New(db, sqldedupe.MySQL, sqldedupe.Config{})
//	...
//	ddtx, err := consumer.DedupeTx(db, store, "billing")
//	...
//	c.Subscribe("orders", consumer.MessageSelector{}, consumer.Concurrently(ddtx(pay)))
//
// The key is claimed first, as with Dedupe: a key already done is
// acknowledged and one held by another consumer is retried later. Then, per
// run:
//
//   - success: the handler's writes and the record commit, then the message
//     is acknowledged;
//   - a handler error or panic, a failed record or a failed commit: the
//     transaction rolls back, the claim is released and the message is
//     retried, so the redelivery runs at once;
//   - a lease lost before the commit (another consumer may have taken the
//     key over): recording fails with [dedupe.ErrLeaseLost] inside the
//     transaction, or the handler's context is cancelled, and the
//     transaction rolls back: the other consumer's run is the one that
//     counts. Once recorded, the key's row stays locked until the commit,
//     so no one can take it over in between;
//   - a commit whose answer was lost: the message is retried, and the record
//     tells the redelivery what happened: done if the commit took effect,
//     free to run again if not.
//
// So the handler's writes through the transaction are applied exactly once;
// anything else it does (a call to another service, a message sent) is not
// covered and may run once per attempt. The handler must neither commit nor
// roll back the transaction. With [dedupe.GuardConfig.FailOpen] and the
// store unreachable, the transaction commits without a record.
package consumer
