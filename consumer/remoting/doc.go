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
// Linking the package routes the client's logs to slog at warn (see
// package rmqlog).
package remoting
