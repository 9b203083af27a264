package msgkey_test

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/idemq/idemq/msgkey"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		key  string
		ok   bool
	}{
		{"Snowflake", "1897240092405760001", true},
		{"Business", "order-1001/pay", true},
		{"Unicode", "注文-🙂", true},
		{"Longest", strings.Repeat("k", msgkey.MaxLen), true},
		{"Empty", "", false},
		{"TooLong", strings.Repeat("k", msgkey.MaxLen+1), false},
		{"LongInRunes", strings.Repeat("é", msgkey.MaxLen/2+1), false},
		{"NotUTF8", "k\xff", false},
		{"Space", "order 1", false},
		{"NoBreakSpace", "order\u00a01", false},
		{"Tab", "order\t1", false},
		{"PropertySeparator", "k\x01v", false},
		{"NameValueSeparator", "k\x02v", false},
		{"Delete", "k\x7f", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := msgkey.Validate(tt.key)
			if (err == nil) != tt.ok {
				t.Fatalf("Validate(%q) = %v, want ok %v", tt.key, err, tt.ok)
			}
			if err != nil && !errors.Is(err, msgkey.ErrInvalid) {
				t.Fatalf("Validate(%q) = %v, does not wrap ErrInvalid", tt.key, err)
			}
		})
	}
}

// TestOf reads keys from property maps; the adapters' tests read them
// from their clients' messages. (No client here: a module that uses
// another client's adapter must not gain this one in its go.sum.)
func TestOf(t *testing.T) {
	if k := msgkey.Of(msgkey.Properties{"other": "x"}); k != "" {
		t.Fatalf("Of(unstamped) = %q", k)
	}
	props := msgkey.Properties{msgkey.Property: "k1", "other": "x"}
	if msgkey.Of(props) != "k1" || msgkey.Of(msgkey.Properties(nil)) != "" {
		t.Fatalf("Of = %q, %q; want k1 for a property map and nothing for a nil one", msgkey.Of(props), msgkey.Of(msgkey.Properties(nil)))
	}
}

// FuzzValidate checks that a key Validate accepts can travel: within the
// limit, UTF-8, and free of the separators of Keys and properties.
func FuzzValidate(f *testing.F) {
	for _, s := range []string{"1897240092405760001", "a b", "k\x01", "é", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		err := msgkey.Validate(key)
		if err != nil {
			if !errors.Is(err, msgkey.ErrInvalid) {
				t.Fatalf("Validate(%q) = %v, does not wrap ErrInvalid", key, err)
			}
			return
		}
		if key == "" || len(key) > msgkey.MaxLen || !utf8.ValidString(key) ||
			strings.IndexFunc(key, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
			t.Fatalf("Validate accepted %q", key)
		}
	})
}
