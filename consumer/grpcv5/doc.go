// Package grpcv5 adapts the consumers of RocketMQ's 5.x gRPC client,
// github.com/apache/rocketmq-clients/golang/v5 (through a 5.x proxy), to a
// [consumer.Consumer]: its handler runs at most once per message key. It
// links no remoting client.
//
//	c, err := consumer.New(store, "order-service")
//	...
//	// A SimpleConsumer: a receive loop, until ctx ends, then a drain.
//	r, err := grpcv5.Simple(c, simpleConsumer, handle, grpcv5.SimpleConfig{})
//	err = r.Run(ctx)
//
//	// A PushConsumer: its listener, drained instead of pc.GracefulStop().
//	l, err := grpcv5.Push(c, handle)
//	pc, err := golang.NewPushConsumer(cfg, golang.WithPushMessageListener(l), ...)
//	l.Drain(ctx, pc)
//
// handle is a consumer.Handler; the [consumer.Message] it reads holds the
// *golang.MessageView in Raw. [Simple] takes a [SimpleConfig] whose zero
// value works, each field stating its default; [Push] has no settings.
//
// # Delivery attempts
//
// A 5.x consumer receives a message for an invisible duration: acknowledged
// by then, it is done; otherwise it becomes visible again, as its next
// delivery attempt. After the group's retryMaxTimes redeliveries (16 by
// default) the proxy dead-letters it (%DLQ%<group>). Changing the invisible
// duration spends nothing: only a redelivery does. So per the Consumer's
// verdict a message is acknowledged (Ack), made visible again after the
// delay of its attempt (Retry: consumer.WithDelayLevels, by default the
// group's default retry policy, 1s 5s 10s 30s …), or left alone until its
// invisible duration ends (Hold). A message without a key can fall back to
// its id with consumer.WithKeyFallback([UniqKey]).
//
// # FIFO groups
//
// In a FIFO group (the group's consumeMessageOrderly) the proxy delivers
// each message group in order and assigns every queue to every consumer,
// serialising each queue itself: a group change moves no queue, and there
// is no lock for a consumer to wait for, as remoting orderly consumers do
// (see package remoting). Measured with PushConsumers, 8 queues
// and 8 message groups: as consumers joined and drained, no message group
// went unconsumed for longer than 0.8 s, and a joining consumer ran its
// first message after 2.5 s. A message received and never acknowledged
// (a consumer that dies) holds its queue until its invisible duration
// ends (the broker's design; not measured here).
//
// Linking the package routes the gRPC client's logs to slog at warn (see
// package rmqlog/grpcrmqlog).
package grpcv5
