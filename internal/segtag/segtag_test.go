package segtag_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/internal/segtag"
)

func TestValidate(t *testing.T) {
	ok := segment.Tag{Tag: "orders", MaxID: 1000, Step: 100}
	with := func(f func(*segment.Tag)) segment.Tag { t := ok; f(&t); return t }
	for _, tt := range []struct {
		name  string
		tag   segment.Tag
		valid bool
	}{
		{"plain", ok, true},
		{"name of 128 bytes", with(func(t *segment.Tag) { t.Tag = strings.Repeat("x", segtag.MaxLen) }), true},
		{"maximum equal to MaxID", with(func(t *segment.Tag) { t.Max = t.MaxID }), true},
		{"largest step", with(func(t *segment.Tag) { t.Step = segtag.MaxStep }), true},
		{"long description", with(func(t *segment.Tag) { t.Description = strings.Repeat("d", 1000) }), true},
		{"empty name", with(func(t *segment.Tag) { t.Tag = "" }), false},
		{"name of 129 bytes", with(func(t *segment.Tag) { t.Tag = strings.Repeat("x", segtag.MaxLen+1) }), false},
		{"name not UTF-8", with(func(t *segment.Tag) { t.Tag = "a\xff" }), false},
		{"no step", with(func(t *segment.Tag) { t.Step = 0 }), false},
		{"step too large", with(func(t *segment.Tag) { t.Step = segtag.MaxStep + 1 }), false},
		{"negative MaxID", with(func(t *segment.Tag) { t.MaxID = -1 }), false},
		{"negative maximum", with(func(t *segment.Tag) { t.Max = -1 }), false},
		{"maximum below MaxID", with(func(t *segment.Tag) { t.Max = t.MaxID - 1 }), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := segtag.Validate(tt.tag)
			if tt.valid != (err == nil) || err != nil && !errors.Is(err, idgen.ErrInvalidConfig) {
				t.Fatalf("Validate() = %v, want valid %v (else ErrInvalidConfig)", err, tt.valid)
			}
		})
	}
}
