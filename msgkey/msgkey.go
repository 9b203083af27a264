// Package msgkey owns idemq's message key: the user property that carries
// it, how to read it, the rules it must follow, its length limit, and how a
// producer stamps it ([Stamp]) with keys from a [Source]. The sending side
// (the client adapters' producers and package outbox) stamps it and the receiving
// side (package consumer, and the dedupe stores' limit) reads and checks it
// by these rules alone, so the two cannot drift apart. It imports only the
// standard library, so a gRPC-only sender links no remoting client, a
// remoting one no gRPC, and a consumer no ID generator.
package msgkey

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Property is the message user property that carries the key.
const Property = "IDEMQ_KEY"

// MaxLen bounds a key in bytes. It keeps store keys and SQL index entries
// bounded: 255 bytes of utf8mb4 fit a MySQL index.
const MaxLen = 255

// ErrInvalid reports a key that cannot be carried or stored: empty, longer
// than MaxLen, not valid UTF-8, or holding characters the transport or a
// store reserves. Package dedupe and its stores return it for a record
// name they cannot store.
var ErrInvalid = errors.New("idemq: invalid message key")

// Of returns m's key, or "" when it carries none. m is a message whose
// user properties can be read, such as RocketMQ's *primitive.Message and
// *primitive.MessageExt, a *consumer.Message, or [Properties].
func Of(m interface{ GetProperty(name string) string }) string { return m.GetProperty(Property) }

// Validate reports whether key can travel in a message: in the Property and
// among the message's Keys. Its error wraps [ErrInvalid]. Besides being
// non-empty, at most MaxLen bytes and valid UTF-8, a key holds no white
// space (RocketMQ separates Keys with spaces) and no control character
// (properties are separated by \x01 and \x02).
func Validate(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty", ErrInvalid)
	case len(key) > MaxLen:
		return fmt.Errorf("%w: %d bytes, limit %d", ErrInvalid, len(key), MaxLen)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalid)
	}
	for _, r := range key {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return fmt.Errorf("%w: %q holds space or control character %U", ErrInvalid, key, r)
		}
	}
	return nil
}
