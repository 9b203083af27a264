package dedupe_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/dedupetest"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/msgkey"
)

func TestRefValidate(t *testing.T) {
	tests := []struct {
		name string
		ref  dedupe.Ref
		ok   bool
	}{
		{"Plain", dedupe.Ref{Namespace: "n", Group: "g", Key: "k"}, true},
		{"NoNamespace", dedupe.Ref{Group: "g", Key: "k"}, true},
		{"Syntax", dedupe.Ref{Namespace: "{*}", Group: "' OR 1=1 --", Key: `]]..redis.call("FLUSHALL")`}, true},
		{"LongestKey", dedupe.Ref{Group: "g", Key: strings.Repeat("🙂", msgkey.MaxLen/4)}, true},
		{"NoGroup", dedupe.Ref{Key: "k"}, false},
		{"NoKey", dedupe.Ref{Group: "g"}, false},
		{"LongKey", dedupe.Ref{Group: "g", Key: strings.Repeat("k", msgkey.MaxLen+1)}, false},
		{"LongGroup", dedupe.Ref{Group: strings.Repeat("g", dedupe.MaxGroupLen+1), Key: "k"}, false},
		{"LongNamespace", dedupe.Ref{Namespace: strings.Repeat("n", dedupe.MaxNamespaceLen+1), Group: "g", Key: "k"}, false},
		{"InvalidUTF8", dedupe.Ref{Group: "g", Key: "\xc3("}, false},
		{"NUL", dedupe.Ref{Group: "g", Key: "a\x00"}, false},
		{"Newline", dedupe.Ref{Group: "g\n", Key: "k"}, false},
		{"DEL", dedupe.Ref{Namespace: "\x7f", Group: "g", Key: "k"}, false},
		{"C1", dedupe.Ref{Group: "g", Key: "\u009b"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.ref.Validate()
			if tt.ok != (err == nil) || (err != nil && !errors.Is(err, dedupe.ErrInvalidKey)) {
				t.Errorf("Validate() = %v, want ok %v or ErrInvalidKey", err, tt.ok)
			}
		})
	}
}

func TestClaimRequestValidate(t *testing.T) {
	ref := dedupe.Ref{Group: "g", Key: "k"}
	tests := []struct {
		name    string
		req     dedupe.ClaimRequest
		wantErr error // nil: valid; errAny: any error
	}{
		{"Valid", dedupe.ClaimRequest{Ref: ref, Lease: time.Second, Fingerprint: dedupe.Fingerprint(nil)}, nil},
		{"NoLease", dedupe.ClaimRequest{Ref: ref}, errAny},
		{"BadRef", dedupe.ClaimRequest{Lease: time.Second}, dedupe.ErrInvalidKey},
		{"LongFingerprint", dedupe.ClaimRequest{Ref: ref, Lease: time.Second, Fingerprint: strings.Repeat("f", dedupe.MaxFingerprint+1)}, dedupe.ErrInvalidKey},
		{"BinaryFingerprint", dedupe.ClaimRequest{Ref: ref, Lease: time.Second, Fingerprint: "\x00\xff"}, dedupe.ErrInvalidKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.req.Validate()
			switch {
			case tt.wantErr == nil && err != nil, tt.wantErr != nil && err == nil:
				t.Errorf("Validate() = %v, want %v", err, tt.wantErr)
			case tt.wantErr != nil && tt.wantErr != errAny && !errors.Is(err, tt.wantErr):
				t.Errorf("Validate() = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

var errAny = errors.New("any error")

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
			got := dedupe.Fingerprint(tt.payload)
			if got != tt.want {
				t.Errorf("Fingerprint = %q, want %q", got, tt.want)
			}
			if err := (dedupe.ClaimRequest{Ref: dedupe.Ref{Group: "g", Key: "k"}, Lease: time.Second, Fingerprint: got}).Validate(); err != nil {
				t.Errorf("not a valid fingerprint: %v", err)
			}
		})
	}
}

func TestFingerprintsConflict(t *testing.T) {
	// sha256a is the hex SHA-256 of "a", as earlier versions recorded it.
	const sha256a = "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"
	fa, fb := dedupe.Fingerprint([]byte("a")), dedupe.Fingerprint([]byte("b"))
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
			if got := dedupe.FingerprintsConflict(tt.recorded, tt.requested); got != tt.want {
				t.Errorf("FingerprintsConflict(%q, %q) = %v, want %v", tt.recorded, tt.requested, got, tt.want)
			}
		})
	}
}

// plainStore hides a store's batch methods, so that the package-level batch
// helpers fall back to one call per item.
type plainStore struct{ dedupe.Store }

// TestClaimBatchFallbackReleasesOnFailure fails the third claim of a batch
// sent to a store without batches: the two claims taken before it are given
// back, so a redelivery can take them at once.
func TestClaimBatchFallbackReleasesOnFailure(t *testing.T) {
	mem := memdedupe.New(memdedupe.Config{})
	fs := dedupetest.NewFaultStore(mem)
	fs.Inject(dedupetest.Fault{Ops: dedupetest.OpClaim, Nth: 3})
	var reqs []dedupe.ClaimRequest
	for _, k := range []string{"a", "b", "c", "d"} {
		reqs = append(reqs, dedupe.ClaimRequest{Ref: dedupe.Ref{Group: "g", Key: k}, Lease: time.Hour})
	}
	if _, _, err := dedupe.ClaimBatch(t.Context(), plainStore{fs}, reqs); !errors.Is(err, dedupetest.ErrInjected) {
		t.Fatalf("ClaimBatch: %v, want the injected fault", err)
	}
	for _, r := range reqs {
		res, err := mem.Claim(t.Context(), r)
		if err != nil || res.Status != dedupe.Acquired {
			t.Errorf("%s after the failed batch: %v, %v; want acquired", r.Key, res.Status, err)
		}
	}
}
