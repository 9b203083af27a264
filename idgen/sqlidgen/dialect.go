package sqlidgen

import (
	"strings"
	"time"
	"unicode/utf8"
)

// markMicros returns a high-water mark in µs since the Unix epoch, rounded
// up so that the stored mark is never before the true one; 0 for the zero
// time and times before 1970, which raise no mark.
func markMicros(t time.Time) int64 {
	if t.IsZero() || t.Before(time.Unix(0, 0)) {
		return 0
	}
	us := t.UnixMicro()
	if t.After(time.UnixMicro(us)) {
		us++
	}
	return us
}

// markTime is the inverse of markMicros: the zero time for 0.
func markTime(us int64) time.Time {
	if us <= 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}

// clip returns s as valid UTF-8 of at most n bytes, cut at a character
// boundary: the columns for operators' descriptions are bounded, and MySQL
// refuses text that is not UTF-8.
func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
