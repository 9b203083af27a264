// Package consumer makes RocketMQ consumers idempotent: a handler runs at
// most once per (consumer group, message key), whichever client delivers
// the message. It links no RocketMQ client: an adapter per client family
// runs a [Consumer] for what its client delivers, package remoting
// for rocketmq-client-go/v2 and package grpcv5 for
// rocketmq-clients/golang/v5.
//
//	c, err := consumer.New(store, "order-service")
//	...
//	// rocketmq-client-go/v2:
//	pc.Subscribe("orders", rmq.MessageSelector{}, remoting.Concurrently(c, handle))
//	...
//	remoting.Drain(ctx, c, pc) // on SIGTERM, instead of pc.Shutdown()
//
//	// rocketmq-clients/golang/v5:
//	r, err := grpcv5.Simple(c, simpleConsumer, handle, grpcv5.SimpleConfig{})
//
// [New] takes what it needs, a [dedupe.Store] and the consumer group, as
// parameters, and functional [Option] values, each stating its default: a
// handful of optional knobs on the call that wraps every handler.
//
// # Delivery semantics
//
// A message's key (see package msgkey) is claimed in the store before the
// [Handler] runs, completed after it succeeds and released when it fails:
// a redelivery of a failed message runs at once, and one of a completed
// message is acknowledged without running. A message without a key is
// retried, never run unguarded, unless [WithKeyFallback] names a fallback.
// The guard answers each message with one of a closed set of outcomes
// ([dedupe.Outcome]), and one table maps each to what the client does with
// the message, a [Stats] counter, an OpenTelemetry count and, where someone
// must hear of it, a log record:
//
//	outcome      client  logged
//	completed    ack
//	suppressed   ack     debug (a duplicate, as designed)
//	failed       retry   (the handler's error is returned to the client)
//	busy         retry   only once waiting in process is spent, no sooner than the holder's lease ends
//	reused       retry   error (the key is recorded with another body)
//	store-down   retry   only once waiting in process for the store is spent (fail-closed; with FailOpen the handler runs: unguarded)
//	invalid-key  retry   error (no key, or one that cannot be stored)
//	lease-lost   ack     error (the effect may have been applied twice)
//	unrecorded   ack     error (the effect ran; its record failed)
//	unguarded    ack     warn
//	canceled     hold    (a drain: left for the queue's next owner)
//
// A lease-lost or unrecorded message is acknowledged because a retry
// cannot undo an effect that ran: alert on their counts. On a store that
// sends completions with claims ([dedupe.CompleteClaimer]: Redis),
// completions are deferred ([dedupe.GuardConfig.LateFailure]): a message is acknowledged as
// completed once its record is queued, and a record that then fails moves
// it to lease-lost or unrecorded in [Stats], adds that outcome to the
// OpenTelemetry count and is logged by group and key. A process killed
// with completions deferred (at most 64) runs their messages again on
// redelivery; a drain records them first. A held message is
// neither acknowledged nor sent back; the queue's next owner gets it
// without a reconsume spent.
//
// A key that another consumer holds is waited for in process, and never
// costs a message its last reconsume ([WithBusyWait]). So is a store that
// is down: the messages whose claims failed wait while one probe asks the
// store, and run once it answers, spending nothing on an outage shorter
// than [WithStoreDownWait] (10 minutes by default) and never a message's
// last reconsume; the outage is logged when it begins and when it ends, not
// per message. Messages delivered
// together, and concurrent deliveries too, share store round trips. The
// adapters' drains (remoting.Drain, grpcv5.Listener.Drain,
// grpcv5.Receiver.Close) stop a client without cutting off a running
// handler.
//
// # Retention
//
// A done key is remembered for the retention ([dedupe.GuardConfig.Retention],
// 72 hours by default), and a delivery after that runs the handler again.
// The broker redelivers a message until its last reconsume: a completed
// message comes back while the batch it was delivered in is retried, or
// when the client sent it back past its consume timeout. So [New] refuses
// a retention shorter than the group's redelivery horizon: the delays of
// its reconsumes, the k-th at delay level k+2 (the broker's rule, and a
// 5.x group's default retry policy), over the levels and the number of
// reconsumes it is told ([WithDelayLevels], [WithMaxReconsumeTimes]). With
// RocketMQ's defaults, 16 reconsumes from 10s to 2h, that is 4h45m40s
// (RocketMQ's docs round it to 4 h 46 min). The horizon counts delays
// alone, not the time handlers and waits take, so leave a margin above it.
// gRPC simple consumers redeliver sooner (a retried message comes back
// after its attempt's delay level), so it is an upper bound for them. A 5.x group with an exponential retry policy is
// beyond what New is told: size the retention from that policy's delays,
// and pass [AcceptShortRetention] if New refuses it. So do tests and
// benchmarks that expire records on purpose.
//
// # Transactions
//
// A Consumer that made a handler with [Consumer.Tx] claims each message's
// key as the first statement of a SQL transaction that the handler writes
// through: one
// commit applies the handler's writes and records the key, a rollback
// undoes both, and the key's row lock, not a lease, keeps duplicates out
// meanwhile. Its writes apply exactly once, at the cost of one commit per
// message, like a handler without dedupe that commits its own.
package consumer
