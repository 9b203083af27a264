// Package remoting adapts the push consumer of RocketMQ's remoting client,
// github.com/apache/rocketmq-client-go/v2, to a [consumer.Consumer]: its
// handler runs at most once per message key. It links no gRPC client.
//
//	c, err := consumer.New(store, "order-service")
//	...
//	pc.Subscribe("orders", rmq.MessageSelector{}, remoting.Concurrently(c, handle))
//	...
//	<-sigterm
//	remoting.Drain(ctx, c, pc) // instead of pc.Shutdown()
//
// handle is a consumer.Handler; the [consumer.Message] it reads holds the
// *primitive.MessageExt in Raw. [Orderly] adapts it for an orderly push
// consumer instead; its one knob, [WithSuspend], is a functional option as
// consumer.New's are.
//
// Every failure is answered ConsumeRetryLater (or, in orderly mode, a
// queue suspension) explicitly: in rocketmq-client-go ConsumeSuccess is the
// zero value, so a bare error return would acknowledge. A message without a
// key can fall back to the client's unique key with
// consumer.WithKeyFallback([UniqKey], consumer.MsgID). Tell the Consumer
// the push consumer's rmq.WithMaxReconsumeTimes
// (consumer.WithMaxReconsumeTimes) and a broker's non-default
// messageDelayLevel (consumer.WithDelayLevels), so that a busy key, or a
// store that is down, is never handed back on a message's last reconsume,
// nor a busy key sooner than its holder's lease ends; keep
// consumer.WithStoreDownWait under the push consumer's
// rmq.WithConsumeTimeout (15 minutes by default).
//
// # Orderly consumers after a group change
//
// The client leaves a queue that a rebalance takes from an orderly
// consumer locked at the broker, and the queue's new owner cannot consume
// it until the lock expires: measured with 8 queues, the queues a joining
// consumer took over, and those that moved between the consumers that
// stayed when one left, went unconsumed for 60-73 s. Allocate with
// [HandBack] (rmq.WithStrategy(remoting.HandBack(resolver,
// rmq.AllocateByAveragely))), which unlocks and locks them itself: 3 s. A
// consumer that shuts down, or drains, unlocks its queues without it (3 s
// too); one that dies keeps them until the lock expires (76 s measured).
// Messages come late in all these cases, never lost, and with keys
// claimed each runs once, in its queue's order.
//
// Linking the package routes the client's logs to slog at warn (see
// package rmqlog).
package remoting
