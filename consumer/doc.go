// Package consumer makes RocketMQ consumers idempotent: a handler runs at
// most once per (consumer group, message key), whichever client delivers
// the message.
//
// [New] returns the one entry point of the receiving side, a [Consumer] for
// a consumer group over a [dedupe.Store]. A [Handler] reads a client-neutral
// [Message]; a client adapter runs it for what its client delivers:
//
//	c, err := consumer.New(store, "order-service")
//	...
//	// rocketmq-client-go/v2 (package consumer/remoting):
//	pc.Subscribe("orders", rmq.MessageSelector{}, remoting.Concurrently(c, handle))
//	...
//	remoting.Drain(ctx, c, pc) // on SIGTERM, instead of pc.Shutdown()
//
//	// rocketmq-clients/golang/v5 (package consumer/grpcv5):
//	r, err := grpcv5.Simple(c, simpleConsumer, handle, grpcv5.SimpleConfig{})
//
// This package links no RocketMQ client; each adapter links only its own.
//
// # Delivery semantics
//
// A message's key (stamped by package producer; see package msgkey) is
// claimed in the store before the handler runs, completed after it
// succeeds and released when it fails, so that a redelivery of a failed
// message runs at once and one of a completed message does not run. The
// guard answers each message with one of a closed set of outcomes
// ([dedupe.Outcome]); one table decides, per outcome, whether the message is
// acknowledged, retried or held, what is counted in [Stats] and the
// OpenTelemetry metrics, and what is logged:
//
//	outcome      action  logged
//	completed    ack
//	suppressed   ack
//	failed       retry   (the handler's error is returned to the client)
//	busy         wait, then retry no sooner than the holder's lease ends
//	reused       retry   error (the key is recorded with another body)
//	store-down   retry   warn (fail-closed; FailOpen runs the handler: unguarded)
//	invalid-key  retry   error (no key, or one that cannot be stored)
//	lease-lost   ack     error (the effect may have been applied twice)
//	unrecorded   ack     error (the effect ran; its record failed)
//	unguarded    ack     warn
//	canceled     hold    (a drain: left for the queue's next owner)
//
// A message without a key is never run unguarded: it is retried until the
// broker dead-letters it, unless [WithKeyFallback] names a fallback. The
// scope is the consumer group: each group processes each message once (in
// broadcasting mode, give each instance its own group name or namespace).
//
// # Busy keys
//
// A key that another consumer holds (it runs the handler now, or it died
// holding the key, whose lease then runs out) is waited for in process, up
// to [WithBusyWait] (by default a whole lease), and then run or suppressed,
// whichever the holder's end makes it. Only then is the message handed
// back, no sooner than the holder's lease ends ([WithDelayLevels]), and
// never on its last reconsume ([WithMaxReconsumeTimes]): a busy key alone
// never sends a message to the dead-letter queue.
//
// # Batches and group commit
//
// The messages a client delivers together are claimed in one store round
// trip and completed in one. With a store that is a [dedupe.Batcher], the
// claims and completions of concurrent deliveries share round trips too
// (group commit), without delaying an idle consumer.
//
// # Draining
//
// A remoting push consumer's Shutdown does not wait for running handlers:
// a process that exits right after it cuts handlers off between their
// effect and its record, and the queue's next owner runs them again.
// [Consumer.Drain], which the adapters call, stops handing messages to
// handlers, waits (bounded) for the running ones to finish and record, then
// stops the client.
//
// # Exactly-once effects with SQL
//
// A lease lost while a handler runs, or a crash between its effect and the
// record, can apply an effect twice. When the effects are rows in the SQL
// database that also holds the dedupe records, [Consumer.Tx] closes that
// gap: the [TxHandler] writes through a transaction, and the record that
// its key is done commits in the same transaction.
package consumer
