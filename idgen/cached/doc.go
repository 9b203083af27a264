// Package cached is Baidu uid-generator's CachedUidGenerator: a ring buffer
// of snowflake IDs that a background padder fills ahead of time from an
// [idgen.Generator], so that [Generator.Next] costs a few atomic operations
// and never waits for the clock while the buffer holds IDs.
//
//	gen, err := idgen.New(node, idgen.Config{Rollback: idgen.Borrow{MaxAhead: 10 * time.Millisecond}})
//	...
//	ids, err := cached.New(ctx, gen, cached.Config{}) // owns gen from here
//	...
//	defer ids.Close()
//	id, err := ids.Next(ctx)
//
// [New] takes the generator, which it owns from then on, as a parameter and
// a [Config] whose zero value works; each field states its default.
//
// A buffer holds several ticks' worth of IDs, more than the clock allows in
// one tick, so the generator runs under [idgen.Borrow]: the padder takes the
// next ticks early, at most Borrow.MaxAhead ahead of the clock, and then
// waits for the clock; the rate of IDs over time is still the layout's.
//
// The trade-off: an ID's time is when it was padded, not when it was taken;
// it may lie up to MaxAhead after the take, or before it by as long as the
// ID sat in the buffer. IDs still buffered at Close are lost, never issued
// again: the generator's high-water mark (its store or its lease) covers
// every ID it padded. After a crash the mark stands further ahead (by
// Config.Reserve, or a lease's window), so give Borrow an Else that waits,
// e.g. Borrow{MaxAhead: m, Else: Wait{Max: time.Second}}.
package cached
