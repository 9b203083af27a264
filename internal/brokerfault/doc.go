// Package brokerfault tests packages producer and consumer, through their
// remoting adapters, against a RocketMQ broker killed with SIGKILL while
// messages flow: a private 4.9.7 cluster (its own name server, two master
// brokers in separate JVMs, a topic with queues on both), a producer
// sending through idemq's producer, a consumer applying a visible effect
// per key through idemq's consumer and a Redis dedupe store, and one broker
// killed mid-run and restarted on its store seconds later.
//
// The effect is a count per message key in a Redis hash, the ledger. At the
// end the test counts exactly which keys the producer was asked to send
// were never applied (lost) and which were applied more than once
// (doubled); both must be zero. A send that returned an error is sent again
// as the same message, so with the same key: whether or not the broker had
// stored the first copy, the dedupe store absorbs the second.
//
// # What a broker's SIGKILL does (checked here)
//
// RocketMQ 4.9.7 and rocketmq-client-go at the go.mod pin, on two cores
// shared with other test runs; ranges over eight runs (four of this
// test's current form):
//
//   - The name server drops the killed broker's routes 44-490 ms after the
//     kill: the kernel closes the broker's connection and the name server
//     drops a broker whose channel closes (not after its 2 min timeout).
//   - Clients keep their cached routes: rocketmq-client-go refreshes
//     routes every 30 s, heartbeats every 30 s and rebalances every 20 s
//     (constants, not options). A producer keeps choosing the dead
//     broker's queues in turn until then or until the broker is back.
//   - With its default 2 retries a producer's SendSync never returned an
//     error: an attempt that fails is retried on another broker (the
//     round-robin selector skips the last broker's queues), 93-178 times
//     per 1,000 messages. With WithRetry(0), 258-444 of 1,000 keys needed
//     the test's resend (336-622 failed calls, all but four "connect:
//     connection refused", the rest "request timeout"). A request already
//     written to the connection when the broker died is not failed when
//     the connection closes; it waits for its timeout (3 s for a send,
//     30 s for a pull), so a producer's first success after the kill came
//     5 ms to 3 s after it.
//   - Restarted on its store, the broker registered 4.7-19 s after its
//     start (abnormal recovery; the slow ones while other JVMs started),
//     and the first send stored on it came 0-30 ms after it registered.
//   - The consumer got the restarted broker's messages again 12-26 s after
//     the restart began: until the consumer's next heartbeat the broker
//     answers its pulls "the consumer's subscription not exist", a pull
//     still waiting on the dead connection waits out its 30 s, and a
//     failed pull waits 3 s. 4-75 messages stored on the killed broker
//     before the kill were first applied after its restart; none was lost.
//   - 0-204 deliveries per run were duplicates (sends the client retried
//     after the killed broker had stored them; messages delivered again
//     from consumer offsets the killed broker had not persisted, which it
//     does every 5 s): all suppressed by the dedupe store, none applied
//     twice.
//
// The package exports nothing; everything lives in its _test.go files.
package brokerfault
