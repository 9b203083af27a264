package dedupe_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/idemq/idemq/dedupe"
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
		{"LongGroup", dedupe.ListRequest{Group: strings.Repeat("g", dedupe.MaxGroupLen+1)}, false, true},
		{"LongNamespace", dedupe.ListRequest{Namespace: strings.Repeat("n", dedupe.MaxNamespaceLen+1), Group: "g"}, false, true},
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
