package dedupekit

import (
	"sync"
	"unsafe"
)

// Strings makes the short strings of every message's path, fingerprints
// and tokens, without an allocation of their own: it copies each into a
// chunk shared by the strings made before it, and allocates a chunk once
// in 4 KiB. A string keeps its whole chunk alive, so it suits strings that
// live about as long as their neighbours (a store's records, a message's
// claim). The zero value is ready; it is safe for concurrent use.
type Strings struct {
	mu    sync.Mutex
	chunk []byte
}

const (
	// stringsChunk is a chunk's size: one allocation per 256 fingerprints.
	stringsChunk = 4 << 10
	// stringsMax is the longest string cut from a chunk; longer ones are
	// allocated on their own, so that a chunk is not spent on a few.
	stringsMax = stringsChunk / 16
)

// Make returns b as a string.
func (s *Strings) Make(b []byte) string {
	if len(b) == 0 || len(b) > stringsMax {
		return string(b)
	}
	s.mu.Lock()
	if len(b) > cap(s.chunk)-len(s.chunk) {
		s.chunk = make([]byte, 0, stringsChunk)
	}
	start := len(s.chunk)
	// Within the capacity, append never moves the chunk, and no byte of it
	// is written twice: the string's bytes stay as they are, which
	// unsafe.String asks.
	s.chunk = append(s.chunk, b...)
	str := unsafe.String(&s.chunk[start], len(b))
	s.mu.Unlock()
	return str
}

// NoErrors returns n nil errors, the per-item errors of a store call in
// which no item failed. Up to 256 they are one shared slice, so that the
// common answer costs no allocation: the caller reads it, never writes it
// (the [dedupe.Store] contract).
func NoErrors(n int) []error {
	if n <= len(noErrors) {
		return noErrors[:n:n]
	}
	return make([]error, n)
}

var noErrors [256]error

// SetError sets item i's error in errs, which may be NoErrors' shared
// slice: it returns errs, or a copy of its own once errs was shared.
func SetError(errs []error, i int, err error) []error {
	if &errs[0] == &noErrors[0] {
		errs = make([]error, len(errs))
	}
	errs[i] = err
	return errs
}
