// Package redisidgen leases worker (node) ids from a pool kept in Redis: an
// [idgen.Leaser], for generators on many hosts that must never use the same
// node id at once (see [idgen.NewLeased]); and it keeps Leaf's segment
// counters ([Segments], see the section below). Every Acquire, Renew and Release
// is one round trip that runs a Lua script, so a grant and its checks are
// atomic on the server.
//
// A pool is the node ids 0 to [Config].Size-1. A lease lasts [Config].Lease
// by the Redis server's clock unless renewed. Acquire hands out the node
// that waited longest, as the central queue of seed 000 does: never-used
// ids first, in order, then freed ids in the order they became free, a
// released node at the tail at once and an expired one when its lease
// ends, so that a retired node rests as long as the pool allows. Every
// node keeps a high-water mark in milliseconds (rounded up) that only goes
// up and outlives its leases, so the next holder starts after the last ID
// anyone issued with it.
//
// # Keys
//
// All keys of a pool share the hash tag {<namespace>:<pool>}, where
// namespace and pool have '%', '{', '}' and ':' percent-encoded:
//
//	{idemq:orders}:meta    hash    lease and size (fixed at creation), created,
//	                               recovering (the fence's end, ms)
//	{idemq:orders}:next    string  the lowest never-used node id
//	{idemq:orders}:free    list    freed node ids, granted from the head
//	{idemq:orders}:live    zset    node id → lease end (ms, Redis clock)
//	{idemq:orders}:holder  hash    node id → token of its lease
//	{idemq:orders}:owner   hash    node id → LeaseRequest.Owner
//	{idemq:orders}:token   hash    token → node id
//	{idemq:orders}:mark    hash    node id → high-water mark (ms)
//	{idemq:orders}:ahead   set     never-used ids above next taken statically
//
// A pool takes a few dozen bytes per node id it has handed out. Expired
// leases are moved to the free list by the next Acquire or Release, in the
// order they ended; no background job runs. On Redis Cluster the tag puts a
// pool on one node; the scripts never touch two slots.
//
// # Clock
//
// Lease ends are measured by the server's TIME, read inside each script
// (Redis 5 or later replicates a script's effects, so a script may read
// the clock and then write; the tests run on Redis 7). Holders measure
// their side by their own monotonic clock, from before the call; see
// [idgen.ErrLeaseExpired]. A step forward of the Redis host's wall clock
// ends leases early: keep it synchronised by slewing (chrony, ntpd -x),
// and keep the holders' safety margin above any step it may still take.
//
// A token is made by the client before the script runs. When a reply is
// lost and go-redis sends an Acquire again, the script finds the lease it
// granted that token and returns it, so a dropped connection never costs a
// node. Renew is idempotent too. A Release sent again fails with
// [idgen.ErrLeaseLost], which a caller that is stopping can ignore.
//
// # Lost records
//
// Redis without persistence loses every lease when it restarts, and a
// failover to an empty replica does the same. A holder whose record is gone
// gets [idgen.ErrLeaseLost] from Renew, but it may still be issuing IDs
// until its last renewal plus the lease, less its margin. So when Acquire
// finds no meta record, it writes one marked "recovering until now + Lease"
// and grants nothing, returning [idgen.ErrNoFreeNode], until that time
// has passed by the Redis clock; by then every holder of a lost lease has
// stopped. The fence uses the caller's Lease, and the pool's records forbid
// leasers with another: a leaser whose Lease or Size differs from the
// pool's meta record is refused with [idgen.ErrInvalidConfig], because a
// longer-leased holder could outlive a shorter fence. To change the lease,
// use a new pool name.
//
// The first Acquire of a pool that never existed waits the same way, since
// Redis cannot tell a new pool from a lost one. [Leaser.Create] records a
// new pool ready to grant at once. It refuses a pool that has any key left,
// but after Redis lost everything nothing is left, so call Create only when
// you know no process holds a lease of the pool: from a deployment step
// that runs once, before the first generator starts, or from a test. Never
// call it on every start: a process restarted right after Redis lost its
// data would hand out nodes that live holders are still using.
//
// # Replication and failover
//
// Redis replicates asynchronously. A failover to a replica that missed the
// last writes keeps the meta record but may lack a lease granted just
// before, so the node is granted twice while its first holder still
// issues IDs. WAIT, which would hold a write until a replica has it,
// cannot run inside a script and covers only its own connection's writes,
// so this package does not send it; min-replicas-to-write narrows the
// window without closing it. What does close it:
//
//   - no automatic failover for the pool's Redis, and AOF with
//     appendfsync always, so that a restart loses nothing; or
//   - after every failover, delete the pool's meta key (the first of
//     [Leaser.Keys]): every holder's next Renew fails, and the next Acquire
//     fences the pool for one lease, keeping the marks that survived.
//
// The Leaser never closes the client it was given.
//
// # Segments
//
// [Segments] is an [idgen.SegmentSource] for [idgen.NewSegmentAllocator]:
// Leaf's segment table kept in Redis, a hash per tag with Leaf's columns as
// fields, which HGETALL shows as they are:
//
//	{idemq:orders}:segment   hash  max_id       end of the last segment reserved
//	                               step         the stored step
//	                               max_limit    the highest max_id may reach; 0 for none
//	                               description  for operators
//	                               update_time  ms since the Unix epoch, by the server's TIME
//	{idemq}:segment-tags     set   every tag name of the namespace, for Tags
//
// The hash tag is {<namespace>:<tag>}, escaped as a pool's, so each tag's
// hash has a cluster slot of its own. [Segments.NextSegment] runs one
// script (EVALSHA, one round trip), which checks the tag exists and its
// maximum and raises max_id with HINCRBY: the same atomic step Leaf's
// UPDATE ... SET max_id = max_id + step takes in MySQL, with no
// transaction. A tag at its maximum fails with [idgen.ErrMaxReached] and
// changes nothing; fewer IDs left than the step make a short last segment.
// Values count in Lua numbers, so MaxID and Max are at most
// [MaxSegmentValue] (2^53), where a tag without a maximum ends.
//
// [Segments.CreateTag] adds the name to the index set before it creates the
// hash, in a command of its own (the set lives in another slot); a name
// whose hash is missing, left by a CreateTag that failed in between, is
// skipped by [Segments.Tags].
//
// Durability is Redis's: a counter is only as safe as the last write Redis
// kept. Redis without persistence, or a failover to a replica that missed
// the last HINCRBY, moves max_id back and hands out segments again, which
// duplicates IDs. Use AOF with appendfsync always and no automatic
// failover, or an SQL table ([github.com/idemq/idemq/idgen/sqlidgen]), for
// IDs that must never repeat.
package redisidgen
