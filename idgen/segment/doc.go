// Package segment is Meituan Leaf's segment mode: the IDs of a named counter
// (a tag) come in segments that a [Store] reserves with one round trip
// each, and an [Allocator] hands them out from memory, one atomic
// addition per ID.
//
//	alloc, err := segment.New(ctx, src, "orders", segment.Config{})
//	...
//	defer alloc.Close()
//	id, err := alloc.Next(ctx)
//
// [New] takes the store and the tag as parameters and a [Config] whose
// zero value works; each field states its default.
//
// Stores: github.com/idemq/idemq/idgen/sqlidgen (Leaf's table, on
// MariaDB/MySQL, PostgreSQL and SQLite) and
// github.com/idemq/idemq/idgen/redisidgen (a counter in Redis);
// [github.com/idemq/idemq/idgen/segment/segmenttest] is the suite they pass.
//
// The next segment is loaded in the background (a double buffer), the step
// adapts to the rate, and a tag's maximum fails loudly with [ErrMaxReached]
// instead of wrapping around. Segment IDs are dense and short but carry no
// time or node: they are unique among the users of one tag, and a crash
// leaves gaps, never duplicates.
package segment
