// Package natsjs is idemq's adapter for NATS JetStream, through nats.go's
// jetstream package: the producer wrap that stamps each message's key
// once ([Producer]), the pull consumer that runs messages through a
// consumer.Consumer ([Pull], [Receiver]), and the outbox sender
// ([OutboxSender]). [RouteLogs] sends nats.go's connection events to slog.
//
// # Two tiers of dedupe
//
// A [Producer] stamps a key into the header msgkey.Property and sets it
// as the message id (Nats-Msg-Id). The stream drops a message whose id it
// saw within its duplicate window (StreamConfig.Duplicates, 2 minutes by
// default): a publish retried after a timeout is stored once. Past the
// window, and for every redelivery, the consumer's dedupe store is the
// second tier: its retention (dedupe.GuardConfig.Retention) must outlast
// how long a copy can come, which is the window's end for a publisher's
// resend and the retry horizon (the delay levels times MaxDeliver) for a
// redelivery.
//
// # Delivery semantics
//
// Each message's verdict maps to one acknowledgement:
//
//   - done, or a suppressed duplicate: Ack (not DoubleAck: an
//     acknowledgement lost only brings a copy, which is suppressed);
//   - failed: NakWithDelay with the delay of its attempt
//     (consumer.WithDelayLevels), which spends a delivery;
//   - held by a drain: Nak, for another consumer at once.
//
// A message in hand spends no delivery: while its handler runs, while its
// key is busy with another consumer, and while the store is down, the
// [Receiver] sends InProgress every third of the consumer's AckWait.
// The server stops delivering a message that reached MaxDeliver, silently
// (an advisory only): set MaxDeliver to the Consumer's max reconsume
// times plus one (consumer.WithMaxReconsumeTimes), so that only failures
// count towards it.
//
// # Order
//
// A JetStream consumer with MaxAckPending 1 delivers one message at a
// time, the next once the last is acknowledged: a [Receiver] on it keeps
// the stream's order, a retried message included. With more pending
// messages, order is not kept.
package natsjs
