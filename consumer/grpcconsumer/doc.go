// Package grpcconsumer makes the consumers of RocketMQ's 5.x gRPC client
// (github.com/apache/rocketmq-clients/golang/v5, through a 5.x proxy)
// idempotent, with a [consumer.Consumer] — the same options, decision
// table, [consumer.Stats], OpenTelemetry metrics and spans, and logger as
// the remoting client's — so that the remoting client's users never link
// gRPC:
//
//	c, err := consumer.New(store, "order-service")
//	...
//	// A SimpleConsumer: a receive loop.
//	r, err := grpcconsumer.Simple(c, simpleConsumer, handle, grpcconsumer.SimpleConfig{})
//	...
//	err = r.Run(ctx) // until ctx ends, then drains
//
//	// A PushConsumer: its listener.
//	l, err := grpcconsumer.Push(c, handle)
//	pc, err := golang.NewPushConsumer(cfg, golang.WithPushMessageListener(l), ...)
//	...
//	l.Drain(ctx, pc) // instead of pc.GracefulStop()
//
// A handler is a [Handler]: func(ctx, *golang.MessageView) error.
//
// # Delivery attempts
//
// A 5.x consumer receives a message for an invisible duration: acknowledged
// by then, it is done; otherwise it becomes visible again, and that
// redelivery is its next delivery attempt. After the group's retryMaxTimes
// redeliveries (16 by default) the proxy sends it to the dead-letter queue
// (%DLQ%<group>) instead. Changing the invisible duration
// (ChangeInvisibleDuration) spends nothing: only a redelivery does.
//
// The key and the decision table are package consumer's (see its
// documentation): the key is the message's msgkey.Property user
// property, else the fallbacks of consumer.WithKeyFallback (consumer.UniqKey
// and consumer.MsgID both give a 5.x message's id, the client-generated
// unique key). Per outcome:
//
//   - acknowledged (completed, suppressed, a lease lost, unrecorded,
//     unguarded): Ack;
//   - retried (failed, reused, store-down, invalid-key): not acknowledged,
//     visible again after the retry delay, which spends an attempt;
//   - busy: see below;
//   - held (a drain ran out of time): not acknowledged, visible again
//     when its invisible duration ends, which spends an attempt.
//
// # SimpleConsumer
//
// [Simple] returns a [Receiver], whose Run receives messages and handles
// each in a goroutine of its own, up to [SimpleConfig.Workers] at once.
// While a message is in hand its invisible duration is renewed, so a long
// handler does not make it visible to others.
//
// A message whose key another consumer holds never spends an attempt while
// this process lives: it stays in hand, its invisible duration extended to
// at least the holder's remaining lease plus a margin, and the key is asked
// about again as package consumer waits for busy keys (soon at first, then
// less often, and just after the lease's end) until the holder completes
// it (the message is suppressed and acknowledged) or releases it or dies
// (the key is claimed and the handler runs). Should this process die
// meanwhile, the message comes back once the holder's lease has ended.
//
// A retried message is made visible again after the delay of its attempt
// in consumer.WithDelayLevels (by default 1s, 5s, 10s, 30s, 1m, …: the 5.x
// group's default retry policy), with ChangeInvisibleDuration.
//
// Run drains when its context ends or [Receiver.Close] is called: it
// stops receiving, lets the messages in hand finish — handlers and busy
// waits alike — up to [SimpleConfig.DrainTimeout], then cancels what still
// runs and leaves it unacknowledged. The same bound cuts short a Receive
// under way (a proxy holds an idle long poll open for about the request
// timeout plus the await duration, which would otherwise outlast a
// typical 30 s termination grace period). A message left so spends an attempt
// when it becomes visible again, as does every message in hand when the
// process dies: unlike the remoting client's offsets, a 5.x receipt
// cannot be handed back unspent.
//
// # PushConsumer
//
// [Push] returns a [Listener] for golang.WithPushMessageListener. The push
// consumer keeps a message invisible while the listener runs; a listener
// that answers FAILURE has the client make the message visible after the
// group's retry policy's delay for its attempt, which spends an attempt.
// A busy key is waited for in process up to consumer.WithBusyWait (by
// default a whole lease, which a dead holder lets run out), and on the
// message's last attempt as long as it is held (tell the Consumer the
// group's retryMaxTimes with consumer.WithMaxReconsumeTimes); only then is
// it answered FAILURE, spending an attempt. [Listener.Drain] stops the
// push consumer with its GracefulStop, which handles the messages received
// already before it returns; see its documentation for what a drain that
// runs out of time spends.
package grpcconsumer
