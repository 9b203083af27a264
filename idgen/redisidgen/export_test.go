package redisidgen

import "github.com/idemq/idemq/idgen/segment"

// Test hooks into the keys of pools and tags.
var (
	// PoolKeys returns l's keys, the meta record first.
	PoolKeys = func(l *Leaser) []string { return l.keys }
	// SegmentKey returns the key of tag's hash in s.
	SegmentKey = func(s segment.Store, tag string) string { return s.(*segments).key(tag) }
	// IndexKey returns the key of the set of s's tag names.
	IndexKey = func(s segment.Store) string { return s.(*segments).index }
	// MaxSize and MaxSegmentValue are the largest pool and counter value.
	MaxSize         = int64(maxSize)
	MaxSegmentValue = int64(maxSegmentValue)
)
