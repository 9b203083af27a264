package rediskey_test

import (
	"strings"
	"testing"

	"github.com/idemq/idemq/internal/rediskey"
)

func TestHashTag(t *testing.T) {
	tests := []struct {
		parts []string
		want  string
	}{
		{nil, "{}"},
		{[]string{""}, "{}"},
		{[]string{"", "g"}, "{:g}"},
		{[]string{"idemq", "orders"}, "{idemq:orders}"},
		{[]string{"a:b", "c"}, "{a%3Ab:c}"},
		{[]string{"a", "b:c"}, "{a:b%3Ac}"},
		{[]string{"a", "{b}"}, "{a:%7Bb%7D}"},
		{[]string{"a", "%7Bb%7D"}, "{a:%257Bb%257D}"},
		{[]string{"%", "}"}, "{%25:%7D}"},
		{[]string{"é", "🙂*?[]"}, "{é:🙂*?[]}"},
		{[]string{"a:b%7Bc%7D"}, "{a%3Ab%257Bc%257D}"},
	}
	for _, tt := range tests {
		if got := rediskey.HashTag(tt.parts...); got != tt.want {
			t.Errorf("HashTag(%q) = %q, want %q", tt.parts, got, tt.want)
		}
	}
}

// TestHashTagDistinct checks that lists of parts that differ only where the
// tag is delimited get tags of their own, each with one brace pair.
func TestHashTagDistinct(t *testing.T) {
	seen := map[string][]string{}
	bits := []string{"", "a", ":", "{", "}", "%", "%3A", "a:b", "}{"}
	for _, x := range bits {
		for _, y := range bits {
			for _, parts := range [][]string{{x}, {x, y}, {x + ":" + y}} {
				tag := rediskey.HashTag(parts...)
				if other, dup := seen[tag]; dup && strings.Join(other, "\x00") != strings.Join(parts, "\x00") {
					t.Errorf("HashTag(%q) = HashTag(%q) = %q", parts, other, tag)
				}
				seen[tag] = parts
				if strings.Count(tag, "{") != 1 || strings.Count(tag, "}") != 1 || !strings.HasSuffix(tag, "}") {
					t.Errorf("HashTag(%q) = %q: want one brace pair around it all", parts, tag)
				}
			}
		}
	}
}
