package dedupekit

import (
	"errors"
	"strings"
	"sync"
	"testing"
)

func TestStrings(t *testing.T) {
	var s Strings
	long := strings.Repeat("x", stringsMax+1)
	for _, in := range []string{"", "a", "0123456789abcdef", strings.Repeat("y", stringsMax), long} {
		b := []byte(in)
		got := s.Make(b)
		clear(b) // the string must not share the caller's bytes
		if got != in {
			t.Errorf("Make(%.20q…) = %.20q…", in, got)
		}
	}
}

// TestStringsConcurrent makes strings from many goroutines, across
// chunks, and checks that none changed afterwards (the race detector
// checks that no byte is written twice).
func TestStringsConcurrent(t *testing.T) {
	var (
		s   Strings
		wg  sync.WaitGroup
		out [8][]string
	)
	for g := range out {
		wg.Go(func() {
			for i := range 1000 {
				out[g] = append(out[g], s.Fingerprint([]byte{byte(g), byte(i), byte(i >> 8)}))
			}
		})
	}
	wg.Wait()
	for g := range out {
		for i, got := range out[g] {
			if want := Fingerprint([]byte{byte(g), byte(i), byte(i >> 8)}); got != want {
				t.Fatalf("goroutine %d string %d = %q, want %q", g, i, got, want)
			}
		}
	}
}

func TestNoErrors(t *testing.T) {
	errs := NoErrors(3)
	if len(errs) != 3 || errs[0] != nil {
		t.Fatalf("NoErrors(3) = %v", errs)
	}
	mine := SetError(errs, 1, errForTest)
	if mine[1] != errForTest || NoErrors(3)[1] != nil {
		t.Fatalf("SetError wrote the shared slice: %v, shared %v", mine, NoErrors(3))
	}
	if again := SetError(mine, 2, errForTest); &again[0] != &mine[0] {
		t.Error("SetError copied a slice of its caller's own")
	}
	if big := NoErrors(1000); len(big) != 1000 {
		t.Errorf("NoErrors(1000) has %d errors", len(big))
	}
}

var errForTest = errors.New("test")
