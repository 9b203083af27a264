// Package consumer makes RocketMQ push-consumer handlers idempotent.
//
// [New] returns the one entry point of the receiving side, a [Consumer] for
// a consumer group over a [dedupe.Store]. Its methods turn a [Handler] into
// the callback a rocketmq.PushConsumer subscribes with — [Consumer.Concurrently]
// or [Consumer.Orderly] — and [Consumer.Drain] stops the push consumer
// without cutting a running handler off:
//
//	c, err := consumer.New(store, "order-service")
//	...
//	pc.Subscribe("orders", rmq.MessageSelector{}, c.Concurrently(handle))
//	...
//	<-sigterm
//	c.Drain(ctx, pc) // instead of pc.Shutdown()
//
// (rmq is github.com/apache/rocketmq-client-go/v2/consumer.)
//
// # Delivery semantics
//
// A message's key (stamped by package producer; see package msgkey) is
// claimed in the store before the handler runs, completed after it
// succeeds and released when it fails. Per (consumer group, key), whatever
// the broker does:
//
//   - a key already done is acknowledged without running the handler;
//   - a key another consumer holds is waited for (see "Busy keys");
//   - a key done or held with another payload is not run; the message is
//     retried and reported (see "Reused keys");
//   - a handler error or panic releases the claim and the message is
//     retried, so the redelivery runs at once: nothing is lost;
//   - success completes the key, then the message is acknowledged.
//
// The guard answers each message with one of a closed set of outcomes
// ([dedupe.Outcome]); one table decides, per outcome, whether the message is
// acknowledged, retried or held, what is counted in [Stats] and the
// OpenTelemetry metrics, and what is logged:
//
//	outcome      action  logged
//	completed    ack
//	suppressed   ack
//	failed       retry   (the handler's error is returned to the client)
//	busy         wait, then retry no sooner than the holder's lease ends
//	reused       retry   error
//	store-down   retry   warn (fail-closed; FailOpen runs the handler: unguarded)
//	invalid-key  retry   error (no key, or one that cannot be stored)
//	lease-lost   ack     error (the effect may have been applied twice)
//	unrecorded   ack     error (the effect ran; its record failed)
//	unguarded    ack     warn
//	canceled     hold    (a drain: left for the queue's next owner)
//
// Failure paths return ConsumeRetryLater explicitly: in rocketmq-client-go
// ConsumeSuccess is the zero value, so a bare error return would acknowledge.
//
// # Batches and group commit
//
// When the push consumer delivers several messages at once
// (rmq.WithConsumeMessageBatchMaxSize), their keys are claimed in one store
// round trip, the handler runs for each acquired message in order, and the
// successes are completed in one round trip and the failures released in
// another. If any message must be retried the whole batch is, as the client
// resends every message of a failed batch; those already completed are
// suppressed on redelivery. By default the client delivers one message per
// callback from up to 20 goroutines; with a store that is a
// [dedupe.Batcher], the claims and completions of those concurrent
// callbacks share round trips (group commit): a request that arrives while
// another is on the wire goes with the next, so an idle consumer waits for
// nothing.
//
// # Busy keys
//
// A key that another consumer holds (it runs the handler now, or it died
// holding the key, whose lease then runs out) is waited for in process, up
// to [WithBusyWait] (by default a whole lease), and then run or suppressed,
// whichever the holder's end makes it. Only when the wait is spent is the
// message handed back, at the first broker delay level no shorter than the
// holder's remaining lease ([WithDelayLevels]). A message on its last
// reconsume ([WithMaxReconsumeTimes]) is never handed back for a busy key,
// nor one whose wait no delay level covers: a busy key alone never sends a
// message to the dead-letter queue. Orderly consumers always wait, for a
// suspension spends a reconsume too.
//
// # Draining
//
// rocketmq-client-go's Shutdown does not wait for running handlers: a
// process that exits right after it cuts handlers off between their effect
// and its record, and the queue's next owner runs them again — doubled
// effects on every rolling deploy. [Consumer.Drain] stops pulling, holds
// what is delivered meanwhile, waits (bounded by its context) for the
// running handlers to finish and record, then shuts the client down; the
// held messages go, unacknowledged and without spending a reconsume, to
// the queue's next owner.
//
// # Other clients
//
// [Consumer.Process] is the same path for the messages of another client,
// described as a [Message]: the client's adapter runs it and does with each
// message what its [Verdict] says. Package consumer/grpcconsumer adapts the
// 5.x gRPC client's SimpleConsumer and PushConsumer so; this package does
// not link it, nor gRPC.
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
// # Reused keys
//
// A key stands for one message: the same key with a different body is a
// mistake upstream (a business key reused, a key function that collides),
// and suppressing it as a duplicate would lose that body silently. So the
// [dedupe.Fingerprint] of each message body is recorded with its key, and a
// delivery whose key is recorded with another body's fingerprint is
// reused: the handler does not run, [Stats.Reused] counts it, an error is
// logged with the group and the key, and the message is retried like any
// failed one until it reaches the dead-letter queue after the broker's
// retries (an orderly consumer holds its queue until the reconsume limit;
// see [Consumer.Orderly]). It is not dead-lettered at once so that a
// conflict only an older consumer reports during an upgrade (below)
// reaches an upgraded one. A redelivery has the same body and is
// suppressed. [WithoutFingerprint] turns the check off, for messages whose
// body changes between sends.
//
// The fingerprint is a checksum against accidents, not a security check.
// Earlier versions recorded a 64-digit SHA-256 fingerprint, and only with
// the option WithFingerprint. A store compares only fingerprints of one
// length, that is of one kind (see [dedupe.ClaimRequest]), so a key they
// recorded answers done or in flight as it would without the check: a
// redelivery across the upgrade is suppressed, and a key reused across it
// goes unnoticed.
//
// # Exactly-once effects with SQL
//
// The handler's effect is applied once per key unless something fails
// between the effect and the store's record of it: a crash there, or a
// lease lost while the handler ran (reported as [Stats.LeaseLost]), can
// apply it twice. When the effects are rows in the SQL database that also
// holds the dedupe records, [Consumer.Tx] closes that gap: the [TxHandler]
// writes through a transaction, and the record that its key is done is
// written in the same transaction, so both commit or neither does.
//
//	store, err := sqldedupe.New(db, sqldedupe.MySQL, sqldedupe.Config{})
//	...
//	c, err := consumer.New(store, "billing")
//	...
//	pay, err := c.Tx(db, payOrder)
//	...
//	pc.Subscribe("orders", rmq.MessageSelector{}, c.Concurrently(pay))
//
// The key is claimed first, as for any handler: a key already done is
// acknowledged and one held by another consumer is waited for. Then, per
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
