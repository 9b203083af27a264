package msgkey

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
)

// maxNameLen bounds the name of a derived key in bytes, so that
// a derived key stays well under [MaxLen] however deep the chain.
const maxNameLen = 64

// Derive returns the key of a message that the handler of message parent,
// in consumer group group, emits under name: name, a hyphen and 26
// characters of a SHA-256 of the three. A handler that runs again for the
// same message (its lease lost, its record forgotten, its topic replayed)
// derives the same keys, so the consumers downstream suppress the copies
// it emits. The key's length is bounded by name's, not by parent's: keys
// derived from derived keys keep within [MaxLen] at any depth.
//
// name tells apart the messages one handler emits ("payment", "receipt-2");
// it is at most 64 bytes and, like a key, holds no white space or
// control character. group is the group that consumes parent, with its
// namespace when it has one ([dedupe.Ref]'s namespace/group), so that two
// groups consuming one message derive different keys. An invalid name
// fails with an error wrapping [ErrInvalid].
func Derive(parent, group, name string) (string, error) {
	if len(name) > maxNameLen {
		return "", fmt.Errorf("%w: derived key name of %d bytes, limit %d", ErrInvalid, len(name), maxNameLen)
	}
	if err := Validate(name); err != nil {
		return "", fmt.Errorf("derived key name: %w", err)
	}
	h := sha256.New()
	// Each part with its length, so that no two triples hash alike.
	for _, s := range []string{parent, group, name} {
		fmt.Fprintf(h, "%d:%s", len(s), s)
	}
	var sum [sha256.Size]byte
	return name + "-" + derivedEncoding.EncodeToString(h.Sum(sum[:0]))[:derivedHashLen], nil
}

// derivedHashLen is the hash's characters in a derived key: 130 bits.
const derivedHashLen = 26

// derivedEncoding spells the hash in lower-case letters and digits, which
// read and compare alike everywhere a key goes.
var derivedEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)
