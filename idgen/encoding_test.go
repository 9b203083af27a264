package idgen_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/idemq/idemq/idgen"
)

func TestDecimal(t *testing.T) {
	tests := []struct {
		id  idgen.ID
		dec string
	}{
		{0, "0"},
		{1, "1"},
		{62, "62"},
		{1541815603606036480, "1541815603606036480"},
		{math.MaxInt64, "9223372036854775807"},
	}
	for _, tt := range tests {
		t.Run(tt.dec, func(t *testing.T) {
			if got := tt.id.String(); got != tt.dec {
				t.Errorf("String %q, want %q", got, tt.dec)
			}
			if got, err := idgen.Parse(tt.dec); err != nil || got != tt.id {
				t.Errorf("Parse(%q) = %d, %v", tt.dec, got, err)
			}
		})
	}
}

// The decimal form has 1 to 19 digits, leading zeros included, and
// nothing else, in every parser that reads it; Parse's errors quote the
// input.
func TestDecimalDigits(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want idgen.ID
		err  error
	}{
		{"one", "1", 1, nil},
		{"leading zeros", "000123", 123, nil},
		{"19 digits worth 1", "0000000000000000001", 1, nil},
		{"19 zeros", "0000000000000000000", 0, nil},
		{"max", "9223372036854775807", math.MaxInt64, nil},
		{"20 digits worth 1", "00000000000000000001", 0, idgen.ErrSyntax},
		{"20 zeros", "00000000000000000000", 0, idgen.ErrSyntax},
		{"20 digits worth max", "09223372036854775807", 0, idgen.ErrSyntax},
		{"20 digits over max", "10000000000000000000", 0, idgen.ErrRange},
		{"over max", "9223372036854775808", 0, idgen.ErrRange},
		{"leading zeros over max", "0009223372036854775808", 0, idgen.ErrRange},
		{"100 zeros", strings.Repeat("0", 100), 0, idgen.ErrSyntax},
		{"empty", "", 0, idgen.ErrSyntax},
		{"sign", "-1", 0, idgen.ErrSyntax},
		{"plus", "+1", 0, idgen.ErrSyntax},
		{"space", " 1", 0, idgen.ErrSyntax},
		{"letter", "12a", 0, idgen.ErrSyntax},
		{"non-ASCII", "1\xff", 0, idgen.ErrSyntax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, p := range []struct {
				name  string
				parse func(string) (idgen.ID, error)
			}{
				{"Parse", idgen.Parse},
				{"UnmarshalText", func(s string) (id idgen.ID, err error) { err = id.UnmarshalText([]byte(s)); return id, err }},
				{"UnmarshalJSON string", func(s string) (id idgen.ID, err error) { err = id.UnmarshalJSON([]byte(`"` + s + `"`)); return id, err }},
				{"UnmarshalJSON number", func(s string) (id idgen.ID, err error) { err = id.UnmarshalJSON([]byte(s)); return id, err }},
			} {
				got, err := p.parse(tt.in)
				if !errors.Is(err, tt.err) || (err == nil && got != tt.want) {
					t.Errorf("%s(%q) = %d, %v; want %d, %v", p.name, tt.in, got, err, tt.want, tt.err)
				}
				if err != nil && p.name == "Parse" {
					checkParseError(t, err, tt.in)
				}
			}
		})
	}
}

func TestJSON(t *testing.T) {
	type msg struct {
		ID   idgen.ID            `json:"id"`
		Refs map[idgen.ID]string `json:"refs,omitempty"`
	}
	in := msg{ID: 1541815603606036480, Refs: map[idgen.ID]string{7: "x"}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"id":"1541815603606036480","refs":{"7":"x"}}`; string(b) != want {
		t.Fatalf("Marshal: %s, want %s", b, want)
	}
	var out msg
	if err := json.Unmarshal(b, &out); err != nil || out.ID != in.ID || out.Refs[7] != "x" {
		t.Fatalf("Unmarshal: %+v, %v", out, err)
	}

	tests := []struct {
		in   string
		want idgen.ID
		err  error
	}{
		{`"42"`, 42, nil},
		{`42`, 42, nil},
		{`null`, 5, nil}, // unchanged
		{`""`, 0, idgen.ErrSyntax},
		{`"4x"`, 0, idgen.ErrSyntax},
		{`"42`, 0, idgen.ErrSyntax},
		{`-1`, 0, idgen.ErrSyntax},
		{`4.2`, 0, idgen.ErrSyntax},
		{`"99999999999999999999"`, 0, idgen.ErrRange},
	}
	for _, tt := range tests {
		id := idgen.ID(5)
		err := id.UnmarshalJSON([]byte(tt.in))
		if !errors.Is(err, tt.err) || (err == nil && id != tt.want) {
			t.Errorf("UnmarshalJSON(%s) = %d, %v; want %d, %v", tt.in, id, err, tt.want, tt.err)
		}
	}
}
