package idgen

import (
	"fmt"
	"math"
)

// Packing composes seed 004's IDs: a counter's value (the index) above a
// shard and an application id,
//
//	index << (ShardBits+AppBits) | shard << AppBits | app
//
// Seed 004 has ShardBits 6 and AppBits 8 ([Seed004]): every application has
// 64 shards, a user's shard is a hash of a key such as the user name modulo
// 64 ([Packing.ShardOf]), and each (application, shard) pair has a counter
// of its own: a segment tag each, so that the index comes from a
// [SegmentAllocator]. IDs of different applications and shards never
// collide, and an ID tells its application and shard ([Packing.Unpack]).
//
// Set each tag's maximum ([Segment].Max) to [Packing.MaxIndex] + 1 so that
// an index never outgrows its bits: the allocator then fails with
// [ErrMaxReached] instead. Seed 004 reduces an ID modulo its limit instead,
// which repeats IDs; Pack never wraps. The zero Packing puts the index
// alone in all 63 bits.
type Packing struct {
	// ShardBits and AppBits are the widths of the shard and application
	// fields, together at most 62 so that the index has a bit.
	ShardBits, AppBits int
}

// Seed004 is seed 004's packing: 64 shards (6 bits) of 256 applications
// (8 bits), leaving 49 bits of index.
var Seed004 = Packing{ShardBits: 6, AppBits: 8}

// Validate reports a packing whose fields are negative or leave the index
// no bit, wrapping [ErrInvalidConfig].
func (p Packing) Validate() error {
	if p.ShardBits < 0 || p.AppBits < 0 || p.ShardBits+p.AppBits > 62 {
		return fmt.Errorf("idgen: packing of %d shard bits and %d app bits: each at least 0, together at most 62: %w", p.ShardBits, p.AppBits, ErrInvalidConfig)
	}
	return nil
}

// MaxIndex returns the largest index that fits.
func (p Packing) MaxIndex() int64 { return math.MaxInt64 >> (p.ShardBits + p.AppBits) }

// Shards returns the number of shards, 2^ShardBits.
func (p Packing) Shards() int64 { return 1 << p.ShardBits }

// Pack composes an ID. Errors wrap [ErrRange] for a field that does not
// fit (a negative one included), or [ErrInvalidConfig] for an invalid
// packing.
func (p Packing) Pack(index, shard, app int64) (ID, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	switch {
	case index < 0 || index > p.MaxIndex():
		return 0, fmt.Errorf("idgen: pack index %d: outside 0 to %d: %w", index, p.MaxIndex(), ErrRange)
	case shard < 0 || shard >= p.Shards():
		return 0, fmt.Errorf("idgen: pack shard %d: outside 0 to %d: %w", shard, p.Shards()-1, ErrRange)
	case app < 0 || app >= 1<<p.AppBits:
		return 0, fmt.Errorf("idgen: pack app %d: outside 0 to %d: %w", app, int64(1)<<p.AppBits-1, ErrRange)
	}
	return ID(index<<(p.ShardBits+p.AppBits) | shard<<p.AppBits | app), nil
}

// Unpack splits an ID that p packed into its fields. p must be valid.
func (p Packing) Unpack(id ID) (index, shard, app int64) {
	v := int64(id)
	return v >> (p.ShardBits + p.AppBits), v >> p.AppBits & (p.Shards() - 1), v & (1<<p.AppBits - 1)
}

// ShardOf returns the shard of key: its 64-bit FNV-1a hash modulo the
// number of shards. Seed 004 takes Java's String.hashCode instead, so the
// shards differ from the seed's for the same key. It allocates nothing.
func (p Packing) ShardOf(key string) int64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= prime
	}
	return int64(h & uint64(p.Shards()-1))
}
