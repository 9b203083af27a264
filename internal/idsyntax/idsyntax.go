// Package idsyntax words the errors of every parser of an ID's text forms:
// idgen's decimal, text and JSON forms and the idemq command's base-32 and
// base-62 ones, so that a bad ID reads alike whichever form it came in.
package idsyntax

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Error reports input that the parser of format ("decimal", "base-32",
// ...) rejected for reason; err is idgen.ErrSyntax or idgen.ErrRange, which
// names the package already. Long input is cut to 40 bytes.
func Error(format, input, reason string, err error) error {
	if len(input) > 40 {
		input = input[:40] + "..."
	}
	return fmt.Errorf("%w: %s ID %s: %s", err, format, strconv.Quote(input), reason)
}

// BadChar is the reason for byte c at offset i that no digit of the form
// is.
func BadChar(c byte, i int) string {
	if c >= utf8.RuneSelf {
		return "invalid byte 0x" + strconv.FormatUint(uint64(c), 16) + " at offset " + strconv.Itoa(i)
	}
	return "invalid character " + strconv.QuoteRune(rune(c)) + " at offset " + strconv.Itoa(i)
}
