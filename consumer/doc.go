// Package consumer makes RocketMQ push-consumer handlers idempotent.
//
// A [Handler] processes one message. [Dedupe] wraps it so that a message's
// key (stamped by package producer) is claimed in a [dedupe.Store] before the
// handler runs, completed after it succeeds and released when it fails.
// [Concurrently] and [Orderly] turn the wrapped handler into the callback a
// rocketmq.PushConsumer subscribes with:
//
//	dd, err := consumer.Dedupe(store, "order-service")
//	...
//	c.Subscribe("orders", consumer.MessageSelector{}, consumer.Concurrently(dd(handle)))
//
// # Delivery semantics
//
// Per (consumer group, key), whatever the broker does:
//
//   - a key already done is acknowledged without running the handler;
//   - a key held by another consumer's live lease is retried later;
//   - a handler error releases the claim and the message is retried later,
//     so the redelivery runs at once: nothing is lost;
//   - success completes the key, then the message is acknowledged.
//
// A message without a key is never passed through silently: it is retried
// (and reaches the dead-letter queue after the broker's retries) unless a
// fallback key was configured with [WithKeyFallback].
//
// Failure paths return ConsumeRetryLater explicitly: in rocketmq-client-go
// ConsumeSuccess is the zero value, so a bare error return would acknowledge.
package consumer
