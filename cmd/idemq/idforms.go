package main

import (
	"strconv"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/internal/idsyntax"
)

// presets are the layouts --layout names: idgen's, and the wide-worker
// layout, whose 38 bits of milliseconds since 2017-12-21 ran out in
// September 2026, kept here to decode its IDs.
var presets = []idgen.Layout{
	idgen.Twitter,
	{
		Name: "wide-worker", TimeBits: 38, WorkerBits: 15, SequenceBits: 10,
		Unit: time.Millisecond, Epoch: time.Date(2017, 12, 21, 0, 0, 0, 0, time.UTC),
	},
	idgen.RollbackBits, idgen.UIDGenerator, idgen.Sonyflake, idgen.JSSafe,
}

// totalBits is the number of bits the IDs of l use.
func totalBits(l idgen.Layout) int {
	return l.TimeBits + l.DatacenterBits + l.WorkerBits + l.GenerationBits + l.SequenceBits
}

// endOfLife is the first instant l's time field cannot hold.
func endOfLife(l idgen.Layout) time.Time {
	return l.Epoch.Add(time.Duration(int64(1)<<l.TimeBits) * l.Unit)
}

// idsPerSecond is the most IDs one node can issue per second under l.
func idsPerSecond(l idgen.Layout) float64 {
	return float64(int64(1)<<l.SequenceBits) * float64(time.Second) / float64(l.Unit)
}

// The compact text forms of an ID: fixed widths, so that byte order equals
// numeric order, and alphabets in ASCII order.
const (
	base32Len = 13 // 13 × 5 bits ≥ 63 bits
	base62Len = 11 // 62^11 > 2^63
	crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	base62    = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	invalid   = 0xff // a byte outside an alphabet in the decoding tables
	maxID     = 1<<63 - 1
)

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

// toBase32 returns id as 13 characters of Crockford's base 32 (digits and
// upper-case letters without I, L, O and U), zero-padded on the left: it
// sorts in ID order and survives case-insensitive systems.
func toBase32(id idgen.ID) string {
	var b [base32Len]byte
	v := uint64(id)
	for i := base32Len - 1; i >= 0; i-- {
		b[i] = crockford[v&31]
		v >>= 5
	}
	return string(b[:])
}

// parseBase32 parses the base-32 form: exactly 13 characters, either case,
// with Crockford's aliases (O for 0; I and L for 1).
func parseBase32(s string) (idgen.ID, error) {
	if len(s) != base32Len {
		return 0, idsyntax.Error("base-32", s, "want 13 characters, got "+strconv.Itoa(len(s)), idgen.ErrSyntax)
	}
	var v uint64
	for i := range len(s) {
		d := crockfordIndex[s[i]]
		if d == invalid {
			return 0, idsyntax.Error("base-32", s, idsyntax.BadChar(s[i], i), idgen.ErrSyntax)
		}
		v = v<<5 | uint64(d)
	}
	// The first character carries bits 64 to 60: 8 or more sets the sign
	// bit or overflows 64 bits.
	if crockfordIndex[s[0]] > 7 {
		return 0, idsyntax.Error("base-32", s, "exceeds 9223372036854775807", idgen.ErrRange)
	}
	return idgen.ID(v), nil
}

// toBase62 returns id as 11 characters of 0-9, A-Z, a-z, zero-padded on the
// left: it sorts in ID order (byte-wise, so case matters).
func toBase62(id idgen.ID) string {
	var b [base62Len]byte
	v := uint64(id)
	for i := base62Len - 1; i >= 0; i-- {
		b[i] = base62[v%62]
		v /= 62
	}
	return string(b[:])
}

// parseBase62 parses the base-62 form: exactly 11 characters.
func parseBase62(s string) (idgen.ID, error) {
	if len(s) != base62Len {
		return 0, idsyntax.Error("base-62", s, "want 11 characters, got "+strconv.Itoa(len(s)), idgen.ErrSyntax)
	}
	var v uint64
	for i := range len(s) {
		d := base62Index[s[i]]
		if d == invalid {
			return 0, idsyntax.Error("base-62", s, idsyntax.BadChar(s[i], i), idgen.ErrSyntax)
		}
		if v > (maxID-uint64(d))/62 {
			return 0, idsyntax.Error("base-62", s, "exceeds 9223372036854775807", idgen.ErrRange)
		}
		v = v*62 + uint64(d)
	}
	return idgen.ID(v), nil
}
