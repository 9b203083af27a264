package idgen_test

import (
	"encoding/json"
	"errors"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/idemq/idemq/idgen"
)

// The seed corpora live in testdata/fuzz; `go test` runs them as unit
// tests, `go test -fuzz FuzzParse` explores further.

// checkParseError fails unless err is a parser's error quoting in (cut
// after 40 bytes) and wrapping ErrSyntax or ErrRange.
func checkParseError(t *testing.T, err error, in string) {
	t.Helper()
	if len(in) > 40 {
		in = in[:40] + "..."
	}
	msg := err.Error()
	// The sentinel first, so that the package is named once.
	lead := strings.HasPrefix(msg, idgen.ErrSyntax.Error()+": ") || strings.HasPrefix(msg, idgen.ErrRange.Error()+": ")
	if !lead || !strings.Contains(msg, " ID "+strconv.Quote(in)+": ") || !(errors.Is(err, idgen.ErrSyntax) || errors.Is(err, idgen.ErrRange)) {
		t.Fatalf("error for %q: %v", in, err)
	}
}

func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		id, err := idgen.Parse(s)
		// strconv is the oracle for strings of digits; Parse takes at
		// most 19 of them, whatever their value.
		digits := s != "" && strings.Trim(s, "0123456789") == ""
		want, werr := strconv.ParseUint(s, 10, 64)
		over := werr != nil || want > math.MaxInt64
		ok := digits && len(s) <= 19 && !over
		if err != nil {
			checkParseError(t, err, s)
			if ok {
				t.Fatalf("Parse(%q): %v, want %d", s, err, want)
			}
			if digits && over && !errors.Is(err, idgen.ErrRange) {
				t.Fatalf("Parse(%q) of a value over the maximum: %v, want ErrRange", s, err)
			}
			if digits && !over && !errors.Is(err, idgen.ErrSyntax) {
				t.Fatalf("Parse(%q) of %d digits: %v, want ErrSyntax", s, len(s), err)
			}
			return
		}
		if !ok || uint64(id) != want {
			t.Fatalf("Parse(%q) = %d, want an error", s, id)
		}
		if back, err := idgen.Parse(id.String()); err != nil || back != id {
			t.Fatalf("round trip of %d: %d, %v", id, back, err)
		}
	})
}

func FuzzUnmarshalJSON(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		id := idgen.ID(-1)
		if err := id.UnmarshalJSON(b); err != nil {
			checkParseError(t, err, string(b))
			return
		}
		if string(b) == "null" {
			if id != -1 {
				t.Fatalf("null changed the ID to %d", id)
			}
			return
		}
		if id < 0 || len(strings.Trim(string(b), `"`)) > 19 {
			t.Fatalf("UnmarshalJSON(%q) = %d", b, id)
		}
		out, _ := json.Marshal(id)
		var back idgen.ID
		if err := back.UnmarshalJSON(out); err != nil || back != id {
			t.Fatalf("round trip of %d through %s: %d, %v", id, out, back, err)
		}
	})
}

// The shapes NodeFromHostname must tell apart, as regular expressions.
var (
	// A StatefulSet's pod: "<set>-<ordinal>", the set of lowercase letters,
	// digits and inner dashes, the ordinal without leading zeros.
	statefulSetPod = regexp.MustCompile(`^([a-z0-9]|[a-z0-9][a-z0-9-]*[a-z0-9])-(0|[1-9][0-9]*)$`)
	// A set that itself ends in -<digits>, as in ip-10-0-0-1.
	addressLike = regexp.MustCompile(`-[0-9]+$`)
	// A Deployment's pod: ReplicaSet hash and random suffix.
	replicaSetPod = regexp.MustCompile(`.-[bcdfghjklmnpqrstvwxz2456789]{8,10}-[bcdfghjklmnpqrstvwxz2456789]{5}$`)
)

func FuzzNodeFromHostname(f *testing.F) {
	f.Fuzz(func(t *testing.T, host string) {
		node, err := idgen.NodeFromHostname(idgen.Twitter, host)
		name, _, _ := strings.Cut(host, ".")
		m := statefulSetPod.FindStringSubmatch(name)
		shaped := m != nil && !addressLike.MatchString(m[1]) && !replicaSetPod.MatchString(name)
		switch {
		case !shaped:
			if !errors.Is(err, idgen.ErrInvalidConfig) {
				t.Fatalf("NodeFromHostname(%q) = %d, %v; want ErrInvalidConfig", host, node, err)
			}
		case len(m[2]) > 4 || m[2] > "1023" && len(m[2]) == 4:
			if !errors.Is(err, idgen.ErrInvalidConfig) {
				t.Fatalf("NodeFromHostname(%q) = %d, %v; want ErrInvalidConfig", host, node, err)
			}
		default:
			if want, _ := strconv.ParseInt(m[2], 10, 64); err != nil || node != want {
				t.Fatalf("NodeFromHostname(%q) = %d, %v; want %d", host, node, err, want)
			}
		}
	})
}
