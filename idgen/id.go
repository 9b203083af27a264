package idgen

import (
	"bytes"
	"strconv"

	"github.com/idemq/idemq/internal/idsyntax"
)

// An ID is a 63-bit snowflake ID. Its layout is not part of the value:
// decode it with the [Layout] or [Generator] that made it.
//
// IDs print in decimal (String, MarshalText) and marshal to JSON as a decimal
// string, because a JavaScript number loses precision past 2^53 (convert to
// int64 for a JSON number); UnmarshalJSON takes a bare number too. Every
// parser accepts exactly the non-negative int64 range; IDs a Generator
// issues are never negative.
type ID int64

// String returns the ID in decimal, up to 19 digits.
func (id ID) String() string { return strconv.FormatInt(int64(id), 10) }

// MarshalText implements [encoding.TextMarshaler] with the decimal form,
// which encoding/json writes as a string: a JavaScript number loses
// precision past 2^53.
func (id ID) MarshalText() ([]byte, error) { return strconv.AppendInt(nil, int64(id), 10), nil }

// UnmarshalText implements [encoding.TextUnmarshaler]; it accepts what
// [Parse] accepts.
func (id *ID) UnmarshalText(text []byte) error {
	v, err := parseDecimal("text", text, 0, len(text))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// UnmarshalJSON implements [encoding/json.Unmarshaler]. It accepts a decimal string
// and, for data written by other tools, a bare integer; null leaves the ID
// unchanged.
func (id *ID) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	from, to := 0, len(data)
	if len(data) >= 2 && data[0] == '"' && data[len(data)-1] == '"' {
		from, to = 1, len(data)-1
	} else if bytes.IndexByte(data, '"') >= 0 {
		return idsyntax.Error("JSON", string(data), "unbalanced quotes", ErrSyntax)
	}
	v, err := parseDecimal("JSON", data, from, to)
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// Parse parses the decimal form of an ID: 1 to 19 ASCII digits (leading
// zeros allowed within the 19), no sign or spaces, at most
// 9223372036854775807. Digits worth more than that are [ErrRange]; more
// than 19 digits worth less (leading zeros) and other bad input are
// [ErrSyntax]. Every parser's error quotes the input and says what is wrong
// with it.
func Parse(s string) (ID, error) { return parseDecimal("decimal", s, 0, len(s)) }

// parseDecimal parses in[from:to]; errors quote all of in.
func parseDecimal[T string | []byte](format string, in T, from, to int) (ID, error) {
	if from == to {
		return 0, idsyntax.Error(format, string(in), "no digits", ErrSyntax)
	}
	var v uint64
	for i := from; i < to; i++ {
		c := in[i]
		if c < '0' || c > '9' {
			return 0, idsyntax.Error(format, string(in), idsyntax.BadChar(c, i), ErrSyntax)
		}
		if v > (maxID-uint64(c-'0'))/10 {
			return 0, idsyntax.Error(format, string(in), "exceeds 9223372036854775807", ErrRange)
		}
		v = v*10 + uint64(c-'0')
	}
	if to-from > maxDigits {
		return 0, idsyntax.Error(format, string(in), "more than 19 digits", ErrSyntax)
	}
	return ID(v), nil
}

const (
	maxID     = 1<<63 - 1
	maxDigits = 19 // of maxID in decimal
)
