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
// What the test saw a broker's SIGKILL do (routes, retries, redeliveries,
// timings) is written at TestKillBroker.
//
// The package exports nothing; everything lives in its _test.go files.
package brokerfault
