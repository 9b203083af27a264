package main

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/idemq/idemq/idgen"
)

func TestIDForms(t *testing.T) {
	tests := []struct {
		id       idgen.ID
		b32, b62 string
	}{
		{0, "0000000000000", "00000000000"},
		{1, "0000000000001", "00000000001"},
		{62, "000000000001Y", "00000000010"},
		{1541815603606036480, "1ASD13XH1F800", "1ptWyK4WgZU"},
		{math.MaxInt64, "7ZZZZZZZZZZZZ", "AzL8n0Y58m7"},
	}
	for _, tt := range tests {
		if got := toBase32(tt.id); got != tt.b32 {
			t.Errorf("toBase32(%d) = %q, want %q", tt.id, got, tt.b32)
		}
		if got := toBase62(tt.id); got != tt.b62 {
			t.Errorf("toBase62(%d) = %q, want %q", tt.id, got, tt.b62)
		}
		if got, err := parseBase32(tt.b32); err != nil || got != tt.id {
			t.Errorf("parseBase32(%q) = %d, %v", tt.b32, got, err)
		}
		if got, err := parseBase62(tt.b62); err != nil || got != tt.id {
			t.Errorf("parseBase62(%q) = %d, %v", tt.b62, got, err)
		}
	}
}

func TestIDFormErrors(t *testing.T) {
	tests := []struct {
		name  string
		parse func(string) (idgen.ID, error)
		in    string
		want  error
	}{
		{"base32 short", parseBase32, "1ASD13XH1F80", idgen.ErrSyntax},
		{"base32 long", parseBase32, "1ASD13XH1F8000", idgen.ErrSyntax},
		{"base32 U", parseBase32, "1ASD13XH1F80U", idgen.ErrSyntax},
		{"base32 punctuation", parseBase32, "1ASD13XH1F80-", idgen.ErrSyntax},
		{"base32 sign bit", parseBase32, "8000000000000", idgen.ErrRange},
		{"base32 over 64 bits", parseBase32, "ZZZZZZZZZZZZZ", idgen.ErrRange},
		{"base62 short", parseBase62, "1ptWyK4WgZ", idgen.ErrSyntax},
		{"base62 symbol", parseBase62, "1ptWyK4WgZ+", idgen.ErrSyntax},
		{"base62 over max", parseBase62, "AzL8n0Y58m8", idgen.ErrRange},
		{"base62 over 64 bits", parseBase62, "zzzzzzzzzzz", idgen.ErrRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.parse(tt.in)
			if !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
			checkIDFormError(t, err, tt.in)
		})
	}
}

// checkIDFormError fails unless err quotes in (cut after 40 bytes) after
// the sentinel it wraps, ErrSyntax or ErrRange, as idgen's parsers do.
func checkIDFormError(t *testing.T, err error, in string) {
	t.Helper()
	if len(in) > 40 {
		in = in[:40] + "..."
	}
	msg := err.Error()
	lead := strings.HasPrefix(msg, idgen.ErrSyntax.Error()+": ") || strings.HasPrefix(msg, idgen.ErrRange.Error()+": ")
	if !lead || !strings.Contains(msg, " ID "+strconv.Quote(in)+": ") || !(errors.Is(err, idgen.ErrSyntax) || errors.Is(err, idgen.ErrRange)) {
		t.Fatalf("error for %q: %v", in, err)
	}
}

func TestBase32Aliases(t *testing.T) {
	want, _ := parseBase32("1AR7F5V6J0001")
	for _, in := range []string{"1ar7f5v6j0001", "IAR7F5V6JOOOL", "iar7f5v6jooo1"} {
		if got, err := parseBase32(in); err != nil || got != want {
			t.Errorf("parseBase32(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}

// The fixed-width forms sort like the IDs.
func TestIDFormsSort(t *testing.T) {
	ids := []idgen.ID{0, 1, 31, 32, 61, 62, 1 << 40, 1541815603606036480, 2124225657427726336, math.MaxInt64}
	for range 1000 {
		ids = append(ids, idgen.ID(rand.Int64()))
	}
	slices.Sort(ids)
	for _, enc := range []func(idgen.ID) string{toBase32, toBase62} {
		var strs []string
		for _, id := range ids {
			strs = append(strs, enc(id))
		}
		if !slices.IsSorted(strs) {
			t.Errorf("encoded IDs out of order")
		}
	}
}

func FuzzParseBase32(f *testing.F) {
	normal := strings.NewReplacer("O", "0", "I", "1", "L", "1")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := parseBase32(s)
		if err != nil {
			checkIDFormError(t, err, s)
			return
		}
		if id < 0 || toBase32(id) != normal.Replace(strings.ToUpper(s)) {
			t.Fatalf("parseBase32(%q) = %d, which encodes as %q", s, id, toBase32(id))
		}
	})
}

func FuzzParseBase62(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		id, err := parseBase62(s)
		if err != nil {
			checkIDFormError(t, err, s)
			return
		}
		if id < 0 || toBase62(id) != s {
			t.Fatalf("parseBase62(%q) = %d, which encodes as %q", s, id, toBase62(id))
		}
	})
}
