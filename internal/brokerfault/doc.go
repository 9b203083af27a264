// Package brokerfault tests idemq against a RocketMQ broker killed with
// SIGKILL while messages flow, on a private 4.9.7 cluster (its own name
// server, two master brokers in separate JVMs, topics with queues on both)
// so that the shared test broker is not disturbed. Each test kills one
// broker mid-run and starts it again on its store.
//
// TestKillBroker sends through idemq's producer and applies each message
// through idemq's consumer and a Redis dedupe store; the effect is a count
// per message key in a Redis hash, the ledger. At the end the test counts
// exactly which keys the producer was asked to send were never applied
// (lost) and which were applied more than once (doubled); both must be
// zero. A send that returned an error is sent again as the same message,
// so with the same key: whether or not the broker had stored the first
// copy, the dedupe store absorbs the second. What the test saw a broker's
// SIGKILL do (routes, retries, redeliveries, timings) is written at
// TestKillBroker.
//
// TestChainUnderFaults runs a chain of three services, A's outbox, B
// consuming in the transactional mode and emitting with Outbox.Emit, C
// applying, with their relays and consumers in processes of their own
// (the package's test binary run again in a role, internal/racechild;
// relays from internal/relaychild), and kills a relay, B's consumer and a
// broker while orders flow.
//
// The package exports nothing; everything lives in its _test.go files.
package brokerfault
