package dedupe_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/dedupekit"
	"github.com/idemq/idemq/msgkey"
)

func TestListRequestValidate(t *testing.T) {
	tests := []struct {
		name    string
		req     dedupe.ListRequest
		ok      bool
		invalid bool // the error wraps ErrInvalidKey
	}{
		{"Group", dedupe.ListRequest{Group: "g"}, true, false},
		{"All", dedupe.ListRequest{Namespace: "n", Group: "g", Prefix: "a*%_", Cursor: "anything", Limit: 7}, true, false},
		{"LongestPrefix", dedupe.ListRequest{Group: "g", Prefix: strings.Repeat("k", msgkey.MaxLen)}, true, false},
		{"NoGroup", dedupe.ListRequest{Namespace: "n"}, false, true},
		{"LongGroup", dedupe.ListRequest{Group: strings.Repeat("g", dedupekit.MaxGroupLen+1)}, false, true},
		{"LongNamespace", dedupe.ListRequest{Namespace: strings.Repeat("n", dedupekit.MaxNamespaceLen+1), Group: "g"}, false, true},
		{"ControlInGroup", dedupe.ListRequest{Group: "g\n"}, false, true},
		{"LongPrefix", dedupe.ListRequest{Group: "g", Prefix: strings.Repeat("k", msgkey.MaxLen+1)}, false, true},
		{"BadUTF8Prefix", dedupe.ListRequest{Group: "g", Prefix: "\xff"}, false, true},
		{"ControlInPrefix", dedupe.ListRequest{Group: "g", Prefix: "a\x00"}, false, true},
		{"NegativeLimit", dedupe.ListRequest{Group: "g", Limit: -1}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.req.Validate()
			if (err == nil) != tt.ok || errors.Is(err, dedupe.ErrInvalidKey) != tt.invalid {
				t.Errorf("Validate() = %v, want ok %v, ErrInvalidKey %v", err, tt.ok, tt.invalid)
			}
		})
	}
}

func TestKeyCursor(t *testing.T) {
	longest := strings.Repeat("é", msgkey.MaxLen/2) + strings.Repeat("k", msgkey.MaxLen%2)
	for _, key := range []string{"k", "a/b c", "é🙂", longest} {
		got, err := dedupekit.ParseKeyCursor(dedupekit.KeyCursor(key))
		if err != nil || got != key {
			t.Errorf("ParseKeyCursor(KeyCursor(%.20q)) = %.20q, %v; want the key", key, got, err)
		}
	}
	if got, err := dedupekit.ParseKeyCursor(""); got != "" || err != nil {
		t.Errorf(`ParseKeyCursor("") = %q, %v; want "", nil`, got, err)
	}
	// A cursor must be base64url of a key List could have returned.
	for _, c := range []string{
		"not a cursor", "%%%", "aw==", // "k", padded
		dedupekit.KeyCursor("\xff"), dedupekit.KeyCursor("a\x00"), dedupekit.KeyCursor(longest + "k"),
	} {
		if got, err := dedupekit.ParseKeyCursor(c); err == nil || errors.Is(err, dedupe.ErrInvalidKey) {
			t.Errorf("ParseKeyCursor(%.20q) = %.20q, %v; want a plain error", c, got, err)
		}
	}
}
