package dedupekit

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemq/idemq/msgkey"
)

// list is a dedupe.ListRequest, which this package cannot import.
type list struct {
	Namespace, Group, Prefix, Cursor string
	Limit                            int
}

// TestFingerprint pins the fingerprints' values: stored records hold them,
// so a change of algorithm or encoding must fail here. The CRC-32C and
// CRC-32 halves of "123456789" are the catalogued check values.
func TestFingerprint(t *testing.T) {
	long := make([]byte, 1000) // long enough for the CRCs' vector code paths
	for i := range long {
		long[i] = byte(i * 7)
	}
	tests := []struct {
		name    string
		payload []byte
		want    string
	}{
		{"Empty", nil, "0000000000000000"},
		{"OneByte", []byte("a"), "c1d04330e8b7be43"},
		{"CheckString", []byte("123456789"), "e3069283cbf43926"},
		{"JSON", []byte(`{"amount":42}`), "65c6d4d4fb61df09"},
		{"OneDigitChanged", []byte(`{"amount":43}`), "76644ca3e27aee48"},
		{"Long", long, "79a16ae6114ad5ff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Fingerprint(tt.payload)
			if got != tt.want {
				t.Errorf("Fingerprint = %q, want %q", got, tt.want)
			}
			if err := CheckClaim("", "g", "k", time.Second, got); err != nil {
				t.Errorf("not a valid fingerprint: %v", err)
			}
		})
	}
}

func TestFingerprintsConflict(t *testing.T) {
	// sha256a is the hex SHA-256 of "a", as earlier versions recorded it.
	const sha256a = "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"
	fa, fb := Fingerprint([]byte("a")), Fingerprint([]byte("b"))
	tests := []struct {
		name                string
		recorded, requested string
		want                bool
	}{
		{"Same", fa, fa, false},
		{"OtherSameLength", fa, fb, true},
		{"OtherSHA256", sha256a, strings.Replace(sha256a, "c", "d", 1), true},
		{"OlderKindRecorded", sha256a, fb, false},
		{"NewerKindRecorded", fa, sha256a, false},
		{"NoneRecorded", "", fa, false},
		{"NoneRequested", fa, "", false},
		{"Neither", "", "", false},
		{"LengthInBytes", "é", "e", false},
		{"ByteForByte", "é", "è", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FingerprintsConflict(tt.recorded, tt.requested); got != tt.want {
				t.Errorf("FingerprintsConflict(%q, %q) = %v, want %v", tt.recorded, tt.requested, got, tt.want)
			}
		})
	}
}

func TestCheckList(t *testing.T) {
	tests := []struct {
		name    string
		req     list
		ok      bool
		invalid bool // the error wraps msgkey.ErrInvalid
	}{
		{"Group", list{Group: "g"}, true, false},
		{"All", list{Namespace: "n", Group: "g", Prefix: "a*%_", Cursor: "anything", Limit: 7}, true, false},
		{"LongestPrefix", list{Group: "g", Prefix: strings.Repeat("k", msgkey.MaxLen)}, true, false},
		{"NoGroup", list{Namespace: "n"}, false, true},
		{"LongGroup", list{Group: strings.Repeat("g", MaxGroupLen+1)}, false, true},
		{"LongNamespace", list{Namespace: strings.Repeat("n", MaxNamespaceLen+1), Group: "g"}, false, true},
		{"ControlInGroup", list{Group: "g\n"}, false, true},
		{"LongPrefix", list{Group: "g", Prefix: strings.Repeat("k", msgkey.MaxLen+1)}, false, true},
		{"BadUTF8Prefix", list{Group: "g", Prefix: "\xff"}, false, true},
		{"ControlInPrefix", list{Group: "g", Prefix: "a\x00"}, false, true},
		{"NegativeLimit", list{Group: "g", Limit: -1}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckList(tt.req.Namespace, tt.req.Group, tt.req.Prefix, tt.req.Limit)
			if (err == nil) != tt.ok || errors.Is(err, msgkey.ErrInvalid) != tt.invalid {
				t.Errorf("CheckList = %v, want ok %v, ErrInvalid %v", err, tt.ok, tt.invalid)
			}
		})
	}
}

func TestKeyCursor(t *testing.T) {
	longest := strings.Repeat("é", msgkey.MaxLen/2) + strings.Repeat("k", msgkey.MaxLen%2)
	for _, key := range []string{"k", "a/b c", "é🙂", longest} {
		got, err := ParseKeyCursor(KeyCursor(key))
		if err != nil || got != key {
			t.Errorf("ParseKeyCursor(KeyCursor(%.20q)) = %.20q, %v; want the key", key, got, err)
		}
	}
	if got, err := ParseKeyCursor(""); got != "" || err != nil {
		t.Errorf(`ParseKeyCursor("") = %q, %v; want "", nil`, got, err)
	}
	// A cursor must be base64url of a key List could have returned.
	for _, c := range []string{
		"not a cursor", "%%%", "aw==", // "k", padded
		KeyCursor("\xff"), KeyCursor("a\x00"), KeyCursor(longest + "k"),
	} {
		if got, err := ParseKeyCursor(c); err == nil || errors.Is(err, msgkey.ErrInvalid) {
			t.Errorf("ParseKeyCursor(%.20q) = %.20q, %v; want a plain error", c, got, err)
		}
	}
}
