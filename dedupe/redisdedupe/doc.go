// Package redisdedupe is a [dedupe.Store] on Redis 5.0
// or later (its scripts call TIME; the tests run Redis 7). On Redis 7.0 or
// later a claim is one native command, SET with NX; before 7.0 it is a Lua
// script. Complete, Release and Extend are Lua scripts everywhere, because
// each changes a record only if the caller's token owns it. Every call,
// and every batch, is one round trip, but for a claim that finds a key
// taken, which reads the record in a second. A record's TTL is its lease
// while it is processing and its retention once it is done, both by the
// server's clock: a done key needs no cleanup job.
//
//	store, err := redisdedupe.New(client, redisdedupe.Config{})
//
// [New] takes the client, which the caller owns and the store never closes,
// and a [Config] whose zero value works; each field states its default.
//
// Run Redis with maxmemory-policy noeviction: under any other policy Redis
// may evict a done record, and the duplicate it guarded against then runs.
// Size its memory for (retention × message rate) records of about 100
// bytes plus the key, and 56 more for a traced consumer's records, which
// keep the applying run's traceparent ([dedupe.Ticket.Trace]), which a
// Suppressed claim answers.
//
// # When Redis is down
//
// A call fails with the client's error, after the client's own retries:
// with go-redis's defaults, against a Redis that refuses connections, each
// call makes 1 + MaxRetries (3) attempts of DialerRetries (5) dials 100 ms
// apart, about 2 s per failed call on an idle machine and 3.5 s under load;
// against a host that drops packets each dial waits out DialTimeout (5 s).
// The consumer (package consumer) does not pay that per message: a claim
// that fails makes the messages wait in process while one probe at a time
// asks the store, and messages delivered meanwhile do not call it either.
// What the client's retries still cost is the calls under way when Redis
// goes down, and the probe's news that it is back. Give the store a client
// that fails fast, as [New]'s failFast example does (about 30 ms per failed
// call against a refused port): DialTimeout 1s, DialerRetries 1 and
// MaxRetries 1, which keeps one retry for a connection lost mid-call, as
// every call here is safe to run twice (see [Store]). The store never
// changes the client's options: the client is the caller's.
//
// All records of one (namespace, consumer group) share a Redis Cluster hash
// slot, so that a batch from one group is one script on one node: spread
// load across nodes with more groups or namespaces, not more keys. See
// [Store] for the record layout, the commands, and what happens when
// go-redis retries, and [Store.List] for what inspecting a group costs.
package redisdedupe
