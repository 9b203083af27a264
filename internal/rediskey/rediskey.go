// Package rediskey is the one rule by which idemq names its Redis keys, so
// that dedupe/redisdedupe and idgen/redisidgen keep their records apart and
// each scope of records in one cluster hash slot.
package rediskey

import "strings"

// HashTag returns "{p1:p2:...}", the parts joined by ':' within braces,
// with '%', '{', '}' and ':' percent-encoded in each part (as %25, %7B, %7D
// and %3A). So the first '}' of a key always closes the tag, Redis Cluster
// hashes exactly the parts, and no two lists of parts share a tag. Stored
// keys depend on this rule: a change would orphan every record written
// before it.
func HashTag(parts ...string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, p := range parts {
		if i > 0 {
			b.WriteByte(':')
		}
		for j := 0; j < len(p); j++ {
			switch c := p[j]; c {
			case '%', '{', '}', ':':
				const hex = "0123456789ABCDEF"
				b.WriteByte('%')
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&15])
			default:
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('}')
	return b.String()
}
