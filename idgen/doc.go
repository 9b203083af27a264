// Package idgen issues unique, time-ordered 63-bit IDs (Twitter's snowflake)
// without a server, and decodes, encodes and parses them. idemq's producer
// stamps every message with one, so that consumers can recognise
// redeliveries.
//
//	gen, err := idgen.NewLeased(ctx, leaser, idgen.Config{}, idgen.LeaseConfig{})
//	...
//	defer gen.Close()
//	id, err := gen.Next(ctx)
//	key := id.String() // "1858211342319468544"
//
// A [Layout] splits an ID into time, node, clock-rollback generation and
// sequence; the default is [Twitter]'s, and [Presets] lists the others. A
// [Generator] issues IDs for one node, lock-free; a [RollbackPolicy] decides
// what it does when the clock steps back, and a [HighWaterStore] carries its
// last ID across restarts. A generator never issues an ID twice.
//
// # Node ids
//
// Every generator running at the same time needs its own node id: two
// generators on one node issue the same IDs for different messages, and a
// consumer drops one of them as a duplicate. Nothing here picks one for you;
// choose, in order of safety:
//
//   - Leased ([NewLeased]): a [Leaser] grants the node from a pool in Redis
//     ([github.com/idemq/idemq/idgen/redisidgen]) or SQL
//     ([github.com/idemq/idemq/idgen/sqlidgen]) for as long as the
//     generator runs, which renews the lease off the hot path and stops
//     issuing ([ErrLeaseExpired]) once it cannot prove it live. Safe for
//     any fleet: replicas, rolling deploys, autoscaling, killed pods.
//   - Static and registered: [LeaseConfig].Static, so that a second process
//     configured with the same node fails at start.
//   - Static ([New], e.g. with [NodeFromEnv]): safe only while one process
//     per node is guaranteed by whoever assigns them.
//   - A StatefulSet pod's ordinal ([NodeFromHostname]): safe only within one
//     StatefulSet whose ordinals stay below the layout's node count.
//
// # Other products
//
// Baidu uid-generator's cached ring buffer is
// [github.com/idemq/idemq/idgen/cached]; Meituan Leaf's segment mode is
// [github.com/idemq/idemq/idgen/segment]; a keyed permutation that hides
// what IDs reveal is [github.com/idemq/idemq/idgen/scramble]; an HTTP ID
// service is [github.com/idemq/idemq/idgen/idhttp].
//
// A snowflake is predictable: never use one as a secret or a token.
package idgen
