// Package redisidgen keeps worker node ids and segment counters in Redis:
// [Leaser] leases node ids from a pool for generators on many hosts that
// must never use the same node id at once (see [idgen.NewLeased]; [Lease]
// is the one call for a sender), and [NewSegments] returns a
// [segment.Store] keeping Meituan Leaf's segment counters.
// Every call is one round trip running a Lua script, atomic on the server.
//
// [New] and [NewSegments] take the client, which the caller owns and they
// never close; New takes a [Config] whose Pool and Size are required, and
// every other field's zero value works and states its default.
//
// A pool is the node ids 0 to [Config].Size-1. A lease lasts [Config].Lease
// by the Redis server's TIME unless renewed; keep the Redis host's clock
// synchronised by slewing (chrony, ntpd -x): a step forward ends leases
// early. Every node keeps a high-water mark that only goes up and outlives
// its leases, so the next holder starts after the last ID anyone issued
// with it.
//
// # Lost records
//
// Redis without persistence loses every lease when it restarts, and a
// failover to an empty replica does the same, while holders of the lost
// leases may still issue IDs until their last renewal plus the lease. So
// when Acquire finds no record of a pool, it grants nothing, failing with
// [idgen.ErrNoFreeNode], for one whole lease by the Redis clock. A pool that
// never existed waits the same way; [Leaser.Create] records a new pool ready
// to grant at once, which is safe only when no process holds a lease of the
// pool: call it from a deployment step that runs once, never on every start.
// A leaser whose Lease or Size differs from the pool's record is refused
// with [idgen.ErrInvalidConfig]; to change the lease, use a new pool name.
//
// # Replication and failover
//
// Redis replicates asynchronously: a failover to a replica that missed the
// last writes may lack a lease granted just before, and grant the node
// twice. To close that window, run the pool's Redis without automatic
// failover and with AOF appendfsync always; or, after every failover,
// delete the pool's meta key ({<namespace>:<pool>}:meta, see [Leaser]), so
// that every holder's next Renew fails and the next Acquire fences the pool
// for one lease. Segment counters are as safe as Redis's last write: a lost
// HINCRBY moves a counter back and repeats IDs; for IDs that must never
// repeat, use the same settings or an SQL table
// ([github.com/idemq/idemq/idgen/sqlidgen]).
package redisidgen
