package segment

import (
	"fmt"
	"math"
)

// AppShard packs a counter's value (the index) above a shard and an
// application id, as a Leaf-style ID service composes its IDs:
//
//	index << (ShardBits+AppBits) | shard << AppBits | app
//
// With [Shards64Apps256] every application has 64 shards, a user's shard is
// a hash of a key such as the user name ([AppShard.ShardOf]), and each
// (application, shard) pair counts on its own tag, whose index comes from an
// [Allocator]. IDs of different applications and shards never collide, and
// an ID tells its application and shard ([AppShard.Unpack]).
//
// Set each tag's maximum ([Tag].Max) to [AppShard.MaxIndex] + 1, so that an
// index never outgrows its bits: the allocator fails with [ErrMaxReached]
// instead of Pack wrapping around and repeating IDs. The zero AppShard puts
// the index alone in all 63 bits.
type AppShard struct {
	// ShardBits and AppBits are the widths of the shard and application
	// fields, together at most 62 so that the index has a bit.
	ShardBits, AppBits int
}

// Shards64Apps256 packs 64 shards (6 bits) of 256 applications (8 bits)
// below a 49-bit index: index<<14 | shard<<8 | app.
var Shards64Apps256 = AppShard{ShardBits: 6, AppBits: 8}

// Validate reports a packing whose fields are negative or leave the index
// no bit, wrapping [ErrInvalidConfig].
func (p AppShard) Validate() error {
	if p.ShardBits < 0 || p.AppBits < 0 || p.ShardBits+p.AppBits > 62 {
		return fmt.Errorf("segment: packing of %d shard bits and %d app bits: each at least 0, together at most 62: %w", p.ShardBits, p.AppBits, ErrInvalidConfig)
	}
	return nil
}

// MaxIndex returns the largest index that fits.
func (p AppShard) MaxIndex() int64 { return math.MaxInt64 >> (p.ShardBits + p.AppBits) }

// Shards returns the number of shards, 2^ShardBits.
func (p AppShard) Shards() int64 { return 1 << p.ShardBits }

// Pack composes an ID. Errors wrap [ErrRange] for a field that does not fit
// (a negative one included), or [ErrInvalidConfig] for an invalid packing.
func (p AppShard) Pack(index, shard, app int64) (int64, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	switch {
	case index < 0 || index > p.MaxIndex():
		return 0, fmt.Errorf("segment: pack index %d: outside 0 to %d: %w", index, p.MaxIndex(), ErrRange)
	case shard < 0 || shard >= p.Shards():
		return 0, fmt.Errorf("segment: pack shard %d: outside 0 to %d: %w", shard, p.Shards()-1, ErrRange)
	case app < 0 || app >= 1<<p.AppBits:
		return 0, fmt.Errorf("segment: pack app %d: outside 0 to %d: %w", app, int64(1)<<p.AppBits-1, ErrRange)
	}
	return index<<(p.ShardBits+p.AppBits) | shard<<p.AppBits | app, nil
}

// Unpack splits an ID that p packed into its fields. p must be valid.
func (p AppShard) Unpack(id int64) (index, shard, app int64) {
	return id >> (p.ShardBits + p.AppBits), id >> p.AppBits & (p.Shards() - 1), id & (1<<p.AppBits - 1)
}

// ShardOf returns the shard of key: its 64-bit FNV-1a hash modulo the number
// of shards. (Java services often take String.hashCode instead, so their
// shards differ for the same key.) It allocates nothing.
func (p AppShard) ShardOf(key string) int64 {
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
