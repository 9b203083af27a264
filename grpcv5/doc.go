// Package grpcv5 holds everything idemq needs for RocketMQ's 5.x gRPC
// client, github.com/apache/rocketmq-clients/golang/v5 (through a 5.x
// proxy): a producer that stamps keys, the simple and push consumers whose
// handler runs at most once per message key, their drain, the outbox's
// sender and the client's log routing. It links no remoting client (that
// is package remoting).
//
// # Sending
//
// [Producer] wraps a golang.Producer (Send, SendAsync and the transactional
// SendWithTransaction; the gRPC client has no one-way send) so that every
// message is stamped with its idempotency key before its first send (see
// msgkey.Stamp: a key the caller set is kept, and every resend of the
// message keeps its key):
//
//	p, err := grpcv5.NewProducer(golangProducer, msgkey.FromIDs(gen))
//	...
//	_, err = p.Send(ctx, msg)
//	key := msgkey.Of(msgkey.Properties(msg.GetProperties()))
//
// Read a key back from a received *golang.MessageView the same way.
// [OutboxSender] ships an outbox's rows, which carry their keys, through a
// plain golang.Producer: the [outbox.Sender] a relay takes. Give that
// producer golang.WithTopics naming at least one topic: the client learns
// its settings from the proxy through a topic's route, and a Producer
// started without one waits in Start for good (other topics are learned
// at their first send).
//
// # Consuming
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
// # Logs
//
// Left alone, the client logs at info through zap to
// $HOME/logs/rocketmq/rocketmq_client_go.log (rotated, up to 10 files of
// 100 MB), or to standard output when the environment variable
// mq.consoleAppender.enabled is "true": a connection and settings line per
// client, and a line per failed attempt. It offers no way to hand it a
// logger (its ResetLogger rebuilds that file logger from the environment),
// so linking this package replaces the client's package-level logger when
// the program starts, before any client exists. Records then go to
// [slog.Default] (as it is when each record is logged) with the client's
// fields as attributes, and no log file is written.
//
// The starting level is warn, or the one the client's own variable
// rocketmq.client.logLevel names ("debug", "info", "warn", "error"). To see
// more, or to send the records to another logger, call [RouteLogs] at any
// time, also while clients run:
//
//	grpcv5.RouteLogs(nil, slog.LevelInfo) // slog.Default, from info up
//
// and change the level later through the returned [*slog.LevelVar]. The
// slog handler's own level applies too. Calling the client's ResetLogger or
// InitLogger undoes the routing for clients created afterwards.
package grpcv5
