// Package remoting holds everything idemq needs for RocketMQ's remoting
// client, github.com/apache/rocketmq-client-go/v2: a producer that stamps
// keys, the push consumer's callbacks whose handler runs at most once per
// message key, their drain, the outbox's sender and the client's log
// routing. It links no gRPC client (that is package grpcv5).
//
// # Sending
//
// [Producer] wraps a rocketmq.Producer (SendSync, SendAsync, SendOneWay)
// and [TransactionProducer] a rocketmq.TransactionProducer, so that every
// message is stamped with its idempotency key before its first send (see
// msgkey.Stamp: a key the caller set is kept, and every resend of the
// message keeps its key):
//
//	p, err := remoting.NewProducer(rocketmqProducer, msgkey.FromIDs(gen))
//	...
//	_, err = p.SendSync(ctx, msg)
//	key := msgkey.Of(msg)
//
// [OutboxSender] ships an outbox's rows, which carry their keys, through a
// plain rocketmq.Producer: the [outbox.Sender] a relay takes.
//
// # Consuming
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
// consumer.WithKeyFallback([UniqKey]). Tell the Consumer
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
// # Logs
//
// The client logs to standard output through logrus at info by default:
// dozens of lines for a few messages, and about ten a second while a name
// server is unreachable. Linking this package routes its records at warn
// and above to [slog.Default] (as it is when each record is logged), with
// the client's fields as attributes, as idemq's own packages log.
//
// To see more, lower the level with rlog.SetLogLevel ("debug", "info",
// "warn", "error"); to send the records to another logger, call
// [RouteLogs] before starting any client:
//
//	remoting.RouteLogs(logger, slog.LevelInfo)
//
// Raise or lower its level later with the returned [*slog.LevelVar].
package remoting
