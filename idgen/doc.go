// Package idgen issues unique, time-ordered 63-bit IDs (Twitter's snowflake)
// without a server, and decodes and parses them. idemq's producer
// stamps messages with them (through msgkey.FromIDs), so that consumers can
// recognise redeliveries.
//
//	gen, err := idgen.NewLeased(ctx, leaser, idgen.Config{}, idgen.LeaseConfig{})
//	...
//	defer gen.Close()
//	id, err := gen.Next(ctx)
//	key := id.String() // "1858211342319468544"
//
// A [Layout] splits an ID into time, node, clock-rollback generation and
// sequence; the default is [Twitter]'s, and the package's variables give
// the others (`idemq id layouts` lists them). A
// [Generator] issues IDs for one node, lock-free; a [RollbackPolicy] decides
// what it does when the clock steps back, and a [HighWaterStore] carries its
// last ID across restarts. A generator never issues an ID twice. [New] and
// [NewLeased] take what they need (a node, or a [Leaser]) as parameters and
// a [Config] (and a [LeaseConfig]) whose zero value works; each field states
// its default.
//
// # Node ids
//
// Every generator running at the same time needs its own node id: two
// generators on one node issue the same IDs for different messages, and a
// consumer drops one of them as a duplicate. Nothing here picks one for you;
// choose, in order of safety:
//
//   - Leased ([NewLeased]): a [Leaser] grants the node from a pool in Redis
//     (package idgen/redisidgen) or SQL (idgen/sqlidgen) for as long as the
//     generator runs; it renews the lease off the hot path and stops issuing
//     ([ErrLeaseLost]) once it cannot prove the lease live. Safe for any
//     fleet: replicas, rolling deploys, autoscaling, killed pods.
//   - Static and registered: [LeaseConfig].Static, so that a second process
//     configured with the same node fails at start.
//   - Static ([New]): safe only while whoever assigns them guarantees one
//     process per node; a StatefulSet pod's ordinal ([NodeFromHostname])
//     only within one StatefulSet.
//
// Baidu uid-generator's cached ring buffer is package idgen/cached, Meituan
// Leaf's segment mode idgen/segment, a keyed permutation that hides what
// IDs reveal idgen/scramble, and an HTTP ID service idgen/idhttp. A
// snowflake is predictable: never use one as a secret or a token.
//
// Every idgen package reports settings that cannot work with
// [ErrInvalidConfig], a closed generator or allocator with [ErrClosed], and
// a value outside its range with [ErrRange]; test with errors.Is.
package idgen
