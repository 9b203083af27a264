package idgen_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/idemq/idemq/idgen"
)

func TestSegmentTagValidate(t *testing.T) {
	ok := idgen.SegmentTag{Tag: "orders", MaxID: 1000, Step: 100}
	with := func(f func(*idgen.SegmentTag)) idgen.SegmentTag { t := ok; f(&t); return t }
	for _, tt := range []struct {
		name  string
		tag   idgen.SegmentTag
		valid bool
	}{
		{"plain", ok, true},
		{"name of 128 bytes", with(func(t *idgen.SegmentTag) { t.Tag = strings.Repeat("x", idgen.MaxTagLen) }), true},
		{"maximum equal to MaxID", with(func(t *idgen.SegmentTag) { t.Max = t.MaxID }), true},
		{"largest step", with(func(t *idgen.SegmentTag) { t.Step = idgen.MaxTagStep }), true},
		{"long description", with(func(t *idgen.SegmentTag) { t.Description = strings.Repeat("d", 1000) }), true},
		{"empty name", with(func(t *idgen.SegmentTag) { t.Tag = "" }), false},
		{"name of 129 bytes", with(func(t *idgen.SegmentTag) { t.Tag = strings.Repeat("x", idgen.MaxTagLen+1) }), false},
		{"name not UTF-8", with(func(t *idgen.SegmentTag) { t.Tag = "a\xff" }), false},
		{"no step", with(func(t *idgen.SegmentTag) { t.Step = 0 }), false},
		{"step too large", with(func(t *idgen.SegmentTag) { t.Step = idgen.MaxTagStep + 1 }), false},
		{"negative MaxID", with(func(t *idgen.SegmentTag) { t.MaxID = -1 }), false},
		{"negative maximum", with(func(t *idgen.SegmentTag) { t.Max = -1 }), false},
		{"maximum below MaxID", with(func(t *idgen.SegmentTag) { t.Max = t.MaxID - 1 }), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.tag.Validate()
			if tt.valid != (err == nil) || err != nil && !errors.Is(err, idgen.ErrInvalidConfig) {
				t.Fatalf("Validate() = %v, want valid %v (else ErrInvalidConfig)", err, tt.valid)
			}
		})
	}
}
