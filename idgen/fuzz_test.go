package idgen_test

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/idemq/idemq/idgen"
)

// The seed corpora live in testdata/fuzz; `go test` runs them as unit
// tests, `go test -fuzz FuzzParse` explores further.

// checkParseError fails unless err is a *ParseError for in wrapping
// ErrSyntax or ErrRange.
func checkParseError(t *testing.T, err error, in string) {
	t.Helper()
	var pe *idgen.ParseError
	if !errors.As(err, &pe) || pe.Input != in || !(errors.Is(err, idgen.ErrSyntax) || errors.Is(err, idgen.ErrRange)) {
		t.Fatalf("error for %q: %#v", in, err)
	}
}

func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		id, err := idgen.Parse(s)
		// strconv is the oracle for strings of digits.
		digits := s != "" && strings.Trim(s, "0123456789") == ""
		want, werr := strconv.ParseUint(s, 10, 64)
		ok := digits && werr == nil && want <= math.MaxInt64
		if err != nil {
			checkParseError(t, err, s)
			if ok {
				t.Fatalf("Parse(%q): %v, want %d", s, err, want)
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

func FuzzParseBase32(f *testing.F) {
	normal := strings.NewReplacer("O", "0", "I", "1", "L", "1")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := idgen.ParseBase32(s)
		if err != nil {
			checkParseError(t, err, s)
			return
		}
		if id < 0 || id.Base32() != normal.Replace(strings.ToUpper(s)) {
			t.Fatalf("ParseBase32(%q) = %d, which encodes as %q", s, id, id.Base32())
		}
	})
}

func FuzzParseBase62(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		id, err := idgen.ParseBase62(s)
		if err != nil {
			checkParseError(t, err, s)
			return
		}
		if id < 0 || id.Base62() != s {
			t.Fatalf("ParseBase62(%q) = %d, which encodes as %q", s, id, id.Base62())
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
		if id < 0 {
			t.Fatalf("UnmarshalJSON(%q) = %d", b, id)
		}
		out, _ := id.MarshalJSON()
		var back idgen.ID
		if err := back.UnmarshalJSON(out); err != nil || back != id {
			t.Fatalf("round trip of %d through %s: %d, %v", id, out, back, err)
		}
	})
}

func FuzzNodeFromHostname(f *testing.F) {
	f.Fuzz(func(t *testing.T, host string) {
		node, err := idgen.NodeFromHostname(idgen.Twitter, host)
		if err != nil {
			if !errors.Is(err, idgen.ErrNoNode) && !errors.Is(err, idgen.ErrNodeRange) {
				t.Fatalf("NodeFromHostname(%q): unexpected error %v", host, err)
			}
			return
		}
		name, _, _ := strings.Cut(host, ".")
		if node < 0 || node > idgen.Twitter.MaxNode() || !strings.HasSuffix(strings.TrimRight(name, "0123456789"), "-") {
			t.Fatalf("NodeFromHostname(%q) = %d", host, node)
		}
		if n, _ := strconv.ParseInt(name[strings.LastIndexByte(name, '-')+1:], 10, 64); n != node {
			t.Fatalf("NodeFromHostname(%q) = %d, want %d", host, node, n)
		}
	})
}
