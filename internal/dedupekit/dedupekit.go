// Package dedupekit holds what the dedupe stores of this module share and
// their users never call: the validation of requests, the payload
// fingerprint and its conflict rule, and the cursors of key-ordered pages.
// It does not import dedupe, which uses it too.
package dedupekit

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"time"
	"unicode/utf8"

	"github.com/idemq/idemq/msgkey"
)

// GiveBackTimeout bounds how long a store spends giving back the claims of
// a call that failed with its outcome unknown (its context ended, or the
// connection dropped, after the database or Redis may have taken the keys),
// on a context detached from the caller's, so that the keys are free at
// once instead of held for a lease.
const GiveBackTimeout = 5 * time.Second

// Limits on the parts of a Ref other than the key (whose limit is
// [msgkey.MaxLen]), in bytes. They keep store keys and SQL index entries
// bounded (255 bytes of utf8mb4 fit a MySQL index).
const (
	MaxNamespaceLen = 64
	MaxGroupLen     = 255
	MaxFingerprint  = 128
)

// DefaultTable is the table of a sqldedupe.Store whose Config names none,
// and the default of the idemq command's table flags.
const DefaultTable = "idemq_dedupe"

// DefaultListLimit is the page size of a listing whose limit is 0.
const DefaultListLimit = 100

// CheckRef reports whether a Ref of namespace, group and key can be
// stored. Its error wraps [msgkey.ErrInvalid] (msgkey.ErrInvalid).
func CheckRef(namespace, group, key string) error {
	if err := checkPart("namespace", namespace, MaxNamespaceLen, true); err != nil {
		return err
	}
	if err := checkPart("group", group, MaxGroupLen, false); err != nil {
		return err
	}
	return checkPart("key", key, msgkey.MaxLen, false)
}

// CheckClaim reports whether a claim of the Ref namespace, group and key
// for lease with fingerprint is well formed.
func CheckClaim(namespace, group, key string, lease time.Duration, fingerprint string) error {
	if err := CheckRef(namespace, group, key); err != nil {
		return err
	}
	if lease <= 0 {
		return fmt.Errorf("dedupe: lease %v must be positive", lease)
	}
	return checkPart("fingerprint", fingerprint, MaxFingerprint, true)
}

// CheckList reports whether a listing can be made: its namespace and group
// as for CheckRef, its prefix as a key that may be empty (its error wraps
// msgkey.ErrInvalid), and a limit that is not negative.
func CheckList(namespace, group, prefix string, limit int) error {
	if err := checkPart("namespace", namespace, MaxNamespaceLen, true); err != nil {
		return err
	}
	if err := checkPart("group", group, MaxGroupLen, false); err != nil {
		return err
	}
	if err := checkPart("prefix", prefix, msgkey.MaxLen, true); err != nil {
		return err
	}
	if limit < 0 {
		return fmt.Errorf("dedupe: list limit %d must not be negative", limit)
	}
	return nil
}

func checkPart(what, s string, max int, emptyOK bool) error {
	switch {
	case s == "" && !emptyOK:
		return fmt.Errorf("%w: empty %s", msgkey.ErrInvalid, what)
	case len(s) > max:
		return fmt.Errorf("%w: %s is %d bytes, limit %d", msgkey.ErrInvalid, what, len(s), max)
	}
	// Every message's key is checked on the hot path, and most are
	// printable ASCII: one comparison a byte tells.
	printable := true
	for i := 0; i < len(s) && printable; i++ {
		printable = s[i]-0x20 < 0x7f-0x20
	}
	if printable {
		return nil
	}
	// Invalid UTF-8 is reported before a control character, wherever
	// each is.
	control := rune(-1)
	for i := 0; i < len(s); {
		c, size := rune(s[i]), 1
		if c >= utf8.RuneSelf {
			if c, size = utf8.DecodeRuneInString(s[i:]); c == utf8.RuneError && size == 1 {
				return fmt.Errorf("%w: %s is not valid UTF-8", msgkey.ErrInvalid, what)
			}
		}
		if control < 0 && (c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0)) {
			control = c
		}
		i += size
	}
	if control >= 0 {
		return fmt.Errorf("%w: %s holds control character %U", msgkey.ErrInvalid, what, control)
	}
	return nil
}

// Fingerprint returns a dedupe.Item fingerprint for payload: 16 lowercase
// hex digits, the CRC-32C of its bytes then their CRC-32 (IEEE), the same
// in every process and version.
//
// It tells a key reused by accident for another payload from a redelivery,
// and is no security check: anyone can make two payloads that share one.
// Two CRCs rather than one 64-bit hash because amd64 and arm64 compute them
// in hardware, several times as fast as FNV-1a or a CRC-64 (ten times for
// 4 KiB), so the check stays cheap for large bodies; together they miss no
// change of up to 64 consecutive bits and a random change once in 2^64.
//
// Earlier versions recorded the 64-digit hex SHA-256 of the payload instead:
// of another length, so of another kind, their records are not compared with
// this one's (see dedupe.Item.Fingerprint).
func Fingerprint(payload []byte) string {
	var buf [16]byte
	return string(fingerprint(&buf, payload))
}

// Fingerprint is [Fingerprint], made in s.
func (s *Strings) Fingerprint(payload []byte) string {
	var buf [16]byte
	return s.Make(fingerprint(&buf, payload))
}

func fingerprint(buf *[16]byte, payload []byte) []byte {
	var sum [8]byte
	binary.BigEndian.PutUint32(sum[:4], crc32.Checksum(payload, castagnoli))
	binary.BigEndian.PutUint32(sum[4:], crc32.ChecksumIEEE(payload))
	hex.Encode(buf[:], sum[:])
	return buf[:]
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// FingerprintsConflict reports whether a claim with the fingerprint
// requested answers Reused to a live record holding recorded: the two are
// of one kind (the same length in bytes) and differ. It is the rule of
// dedupe.Item.Fingerprint, which every dedupe.Store applies.
func FingerprintsConflict(recorded, requested string) bool {
	return len(recorded) == len(requested) && recorded != requested
}

// KeyCursor is the cursor of a List page that ends with key, for stores
// whose pages are in byte order of the key: the key in base64url, so that it
// prints as one word. ParseKeyCursor turns it back.
func KeyCursor(key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(key))
}

// ParseKeyCursor returns the key a KeyCursor holds, "" for the empty
// cursor. A cursor that is not one is an error.
func ParseKeyCursor(c string) (string, error) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(c)
	if err != nil || c != "" && checkPart("key", string(b), msgkey.MaxLen, false) != nil {
		return "", fmt.Errorf("dedupe: cursor %q is not one List returned", c)
	}
	return string(b), nil
}

// maxTrace bounds the trace of a completion that a store keeps.
const maxTrace = 128

// KeptTrace is trace if a store keeps it, as dedupe.Ticket's Trace says (at most
// 128 bytes of printable ASCII without spaces), else empty: a trace is
// for following a duplicate, never a reason for a completion to fail.
func KeptTrace(trace string) string {
	if len(trace) > maxTrace {
		return ""
	}
	for i := 0; i < len(trace); i++ {
		if c := trace[i]; c <= ' ' || c > '~' {
			return ""
		}
	}
	return trace
}
