package idgen

import "strconv"

// Fixed widths of the compact forms. Every character of an ID counts, so
// that byte order equals numeric order.
const (
	base32Len = 13 // 13 × 5 bits ≥ 63 bits
	base62Len = 11 // 62^11 > 2^63
)

// Both alphabets are in ASCII order, which keeps the encodings sortable.
const (
	crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	base62    = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)

// invalid marks bytes outside an alphabet in the decoding tables.
const invalid = 0xff

var (
	crockfordIndex = func() (t [256]byte) {
		for i := range t {
			t[i] = invalid
		}
		for i := range len(crockford) {
			t[crockford[i]] = byte(i)
			t[crockford[i]|0x20] = byte(i) // lower case; digits map to themselves
		}
		// Crockford's aliases for characters easily misread.
		for _, c := range "Oo" {
			t[c] = 0
		}
		for _, c := range "IiLl" {
			t[c] = 1
		}
		return t
	}()
	base62Index = func() (t [256]byte) {
		for i := range t {
			t[i] = invalid
		}
		for i := range len(base62) {
			t[base62[i]] = byte(i)
		}
		return t
	}()
)

// Base32 returns the ID as 13 characters of Crockford's base 32 (digits and
// upper-case letters without I, L, O and U), zero-padded on the left, e.g.
// "1ASD13XH1F800". It sorts in ID order and survives case-insensitive
// systems.
func (id ID) Base32() string {
	var b [base32Len]byte
	v := uint64(id)
	for i := base32Len - 1; i >= 0; i-- {
		b[i] = crockford[v&31]
		v >>= 5
	}
	return string(b[:])
}

// ParseBase32 parses the Base32 form: exactly 13 characters, either case,
// with Crockford's aliases (O for 0; I and L for 1).
func ParseBase32(s string) (ID, error) {
	if len(s) != base32Len {
		return 0, parseError("base-32", s, "want 13 characters, got "+strconv.Itoa(len(s)), ErrSyntax)
	}
	var v uint64
	for i := range len(s) {
		d := crockfordIndex[s[i]]
		if d == invalid {
			return 0, parseError("base-32", s, badChar(s[i], i), ErrSyntax)
		}
		v = v<<5 | uint64(d)
	}
	// The first character carries bits 64 to 60: 8 or more sets the sign
	// bit or overflows 64 bits.
	if crockfordIndex[s[0]] > 7 {
		return 0, parseError("base-32", s, "exceeds 9223372036854775807", ErrRange)
	}
	return ID(v), nil
}

// Base62 returns the ID as 11 characters of 0-9, A-Z, a-z, zero-padded on
// the left, e.g. "1ptWyK4WgZU". It sorts in ID order (byte-wise, so case
// matters).
func (id ID) Base62() string {
	var b [base62Len]byte
	v := uint64(id)
	for i := base62Len - 1; i >= 0; i-- {
		b[i] = base62[v%62]
		v /= 62
	}
	return string(b[:])
}

// ParseBase62 parses the Base62 form: exactly 11 characters.
func ParseBase62(s string) (ID, error) {
	if len(s) != base62Len {
		return 0, parseError("base-62", s, "want 11 characters, got "+strconv.Itoa(len(s)), ErrSyntax)
	}
	var v uint64
	for i := range len(s) {
		d := base62Index[s[i]]
		if d == invalid {
			return 0, parseError("base-62", s, badChar(s[i], i), ErrSyntax)
		}
		if v > (maxID-uint64(d))/62 {
			return 0, parseError("base-62", s, "exceeds 9223372036854775807", ErrRange)
		}
		v = v*62 + uint64(d)
	}
	return ID(v), nil
}
