// Package redisdedupe is a [dedupe.Store] on Redis: every call and every
// batch is one round trip that runs a Lua script, so a claim and its checks
// are atomic on the server.
//
// [New] takes the client, which the caller owns and the store never closes,
// and a [Config] whose zero value works; each field states its default.
//
// # Records
//
// A record is one string key,
//
//	<Prefix>{<namespace>:<group>}:<key>
//
// where namespace and group have '%', '{', '}' and ':' percent-encoded so that
// no two Refs share a key, and the message key follows verbatim. Its value is
// the state ('p' processing or 'd' done), the 26-byte owner token and the
// payload fingerprint; its TTL is the lease while processing and the
// retention once done. Redis expires it, so every deadline is kept by the
// server's clock and a done key needs no cleanup job. Size Redis's memory
// for (retention × message rate) records of about 100 bytes plus the key,
// and run it with maxmemory-policy noeviction: under any other policy Redis
// may evict a done record, and the duplicate it guarded against then runs.
//
// The scripts are sent by EVALSHA, and once more by EVAL when Redis has lost
// them (a restart or SCRIPT FLUSH). They call TIME, so Redis 5.0 or later is
// needed; the tests run against Redis 7.
//
// Tokens are compared inside the scripts: a consumer whose lease ran out can
// neither complete, release nor extend a claim that someone else holds.
//
// # Retries
//
// go-redis sends a command again when its connection drops before the
// answer arrives (Options.MaxRetries, 3 by default), so a script may run
// twice. Every call is safe to run twice: a claim's token is drawn once per
// call, and a claim that finds its own record answers Acquired with that
// token rather than in flight to its own caller, which would block the key
// for a whole lease; a Complete run again succeeds. Only a Release run again
// answers [dedupe.ErrLeaseLost], its record being gone already. A claim
// that fails after all gives back what it may have taken, so its keys are
// free at once.
//
// # Redis Cluster
//
// The braces make (namespace, group) the key's hash tag, so all keys of one
// consumer group live in one hash slot and a batch from one group is a single
// EVALSHA on the node that owns that slot. A batch that spans groups is split
// into one script per group, all sent in one pipeline: one round trip on a
// single server, one per node (in parallel) on a cluster. One group's records therefore
// sit on one node; spread load across nodes with more groups or namespaces,
// not more keys.
//
// # Inspecting
//
// Store is a [dedupe.Inspector] too. Get is one script and Forget one DEL.
// List and Stats SCAN the node that holds the group (on a cluster, the
// master of its hash slot) with MATCH on the group's keys, so they cost
// O(keys on that node), every group's included, not O(the group's
// records): Stats walks them all, in steps of 1000 keys; a page of List
// takes at most 64 such steps, and one script per step reads the records
// found. SCAN does not block Redis, but on a node of millions of keys, run
// them off-peak. A page comes in SCAN order and its cursor is SCAN's; see
// [dedupe.Inspector] for what that allows.
//
// Forget deletes a record whatever its state. It is for reprocessing after
// a bad deploy: the key's next delivery runs its handler again, side
// effects included, and a consumer still holding the key loses its lease
// (its Complete fails with [dedupe.ErrLeaseLost]).
package redisdedupe
