// Package idgen issues unique, time-ordered 63-bit IDs (snowflakes) without a
// server, and decodes, encodes and parses them. idemq's producer stamps every
// message with one, so that consumers can recognise redeliveries.
//
//	gen, err := idgen.NewLeased(ctx, leaser, idgen.Config{}) // see Node ids
//	...
//	id, err := gen.Next(ctx)
//	key := id.String() // "1858211342319468544"
//
// # Layouts
//
// A [Layout] splits an ID into time, node (optionally datacenter and worker),
// clock-rollback generation and sequence fields, with a time unit from 1ms
// to 1s and an epoch. The default is [Twitter] (41 bits of milliseconds, 5 +
// 5 node bits, 12 sequence bits); presets cover the layouts of the seed
// articles, Sonyflake and [JSSafe], whose IDs stay below 2^53. Validate
// checks a layout; Report prints its end of life, capacity and the date from
// which its IDs no longer fit a JavaScript number. New refuses a layout with
// less than ten years left unless told otherwise, and one already out of time
// (uid-generator's default layout ran out in November 2024).
//
// # Generator
//
// A [Generator] issues IDs for one node. Its hot path is one atomic
// compare-and-swap and allocates nothing; [Generator.Fill] takes a batch
// with one compare-and-swap per tick. At a full sequence it waits for the
// next tick: it parks until two milliseconds before, then one caller spins
// while the others sleep, because the runtime's timers oversleep by about a
// millisecond (sleeping through the tick is why Sonyflake reaches about 80%
// of its capacity). Every wait honours the context. The default clock is the
// wall clock read through the monotonic clock; a [CoarseClock] makes a
// reading an atomic load.
// Decoding needs only the layout: [Layout.Decode] and [Generator.Decode] use
// no package state, so IDs of different layouts decode side by side.
//
// # Clock rollback
//
// When the clock steps back, the [RollbackPolicy] decides: [Refuse] with
// [ErrClockBackwards] (the default), [Wait] for the clock when the step is
// small, [BumpGeneration] to the next rollback generation, [Borrow] from
// the future as a logical clock at most a bounded time ahead, or [SwitchWorker]
// to a fresh node id from a [WorkerSource] or the generator's [Leaser].
// Whatever the policy, one
// generator never issues an ID twice. With a [HighWaterStore] (such as
// [FileStore]) the same holds across restarts: a generator restarted with
// its clock behind the mark of the previous run treats the gap as a
// rollback.
//
// # Node ids
//
// Every generator running at the same time needs its own node id: two
// generators on one node issue the same IDs for different messages, and a
// consumer drops one of them as a duplicate. Nothing in this package picks
// one for you; choose, in order of safety:
//
//   - Leased ([NewLeased]): the node comes from a pool in Redis
//     ([github.com/idemq/idemq/idgen/redisidgen]) or SQL
//     ([github.com/idemq/idemq/idgen/sqlidgen]) for as long as the
//     generator runs. Safe for any fleet: replicas, rolling deploys,
//     autoscaling, killed pods.
//   - Static and registered: [LeaseConfig].Node with [LeaseConfig].Static,
//     so that a second process configured with the same node fails at start.
//   - Static (the node given to [New], e.g. from [NodeFromEnv]): safe only
//     while one process per node is guaranteed by whoever assigns them.
//   - A StatefulSet pod's ordinal ([NodeFromHostname]): safe only within one
//     StatefulSet whose ordinals stay below the layout's node count, one
//     generator per pod; host names that merely end in a number
//     (ip-10-0-7-1, a Deployment's web-5d8f7c9b4-24567) are refused.
//
// A [FileStore] holds its file for one generator, so two generators given
// the same file fail with [ErrStoreLocked].
//
// # Leases
//
// A [Leaser] grants a node id for a lease measured by its store's clock and
// keeps, per node, a high-water mark: the end of the last time unit anyone
// issued IDs in with it. A leased generator starts after the mark, renews a
// third of the way through the lease off the hot path, and raises the mark
// with every renewal to the end of the window it may issue in before the
// next, so that the node's next holder starts after every ID it issued even
// if it is killed, and even if its clock runs behind. It stops issuing —
// Next fails with [ErrLeaseExpired] — once it cannot prove its lease live:
// its last successful renewal, by the local monotonic clock, plus the lease
// less [LeaseConfig].Margin lies behind. A renewal that succeeds resumes it;
// a lease found lost is replaced by a new one, perhaps on another node. On
// Close it releases the node with the exact mark of its last ID, so that
// the next holder after a rolling restart starts at once. With a nil
// Source, [SwitchWorker] leases a fresh node and retires the old one to the
// tail of the pool (seed 000).
//
// # Text forms
//
// [ID.String] is decimal; [ID.Base32] (Crockford, 13 characters) and
// [ID.Base62] (11 characters) are fixed-width and sort like the IDs. JSON
// carries an ID as a decimal string, which JavaScript cannot round. The
// Append methods allocate nothing; [Parse], [ParseBase32] and [ParseBase62]
// report bad input as a [*ParseError] wrapping [ErrSyntax] or [ErrRange].
//
// A snowflake is predictable: never use one as a secret or a token.
//
// # Cached generator
//
// [Cached] is seed 003's CachedUidGenerator: a ring buffer of IDs that a
// background padder fills ahead of time from a Generator running under
// [Borrow], so that [Cached.Next] is a few atomic operations and never waits
// for the clock while the buffer holds IDs. An ID's time is when it was
// padded; IDs still buffered at Close are lost, never issued again.
//
// # Segment mode
//
// [SegmentAllocator] is Leaf's segment mode (seed 004): IDs of a named counter
// (a tag) come in segments that a [SegmentSource] reserves with one store
// round trip each — github.com/idemq/idemq/idgen/sqlidgen (Leaf's table, on
// MariaDB/MySQL, PostgreSQL and SQLite) or github.com/idemq/idemq/idgen/redisidgen
// (a counter in Redis); memidgen for one process. The next segment is loaded
// in the background (a double buffer), the step adapts to the rate, and a
// tag's maximum fails loudly with [ErrMaxReached] instead of wrapping around.
// Segment IDs are dense and short but have no time or node: they are unique
// only among the users of one tag. [Packing] composes seed 004's
// application and shard fields around a segment's index.
//
// # Non-guessable IDs
//
// A [Scrambler] permutes IDs with a secret key, within their width, so that
// IDs shown outside reveal neither time, node, sequence nor order; the key
// turns them back. It is not encryption of a secret: read its documentation
// for what it does and does not hide.
package idgen
