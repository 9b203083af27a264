package memdedupe

import (
	"math"
	"math/bits"
	"time"
)

// Records sit in pages of pageSize slots, so that the store grows by a page
// and never copies its records: a slice of them, grown under the lock,
// copied every record at once, in 160 ms at a million records and 1.2 s at
// 2.4 million.
const (
	pageBits = 8
	pageSize = 1 << pageBits
	// maxPages keeps every slot number below 2^32-1: a cell holds slot+1
	// in 32 bits.
	maxPages = math.MaxUint32 >> pageBits
)

type page [pageSize]record

// expireStep is how many slots a claim examines for expired records. A
// pass over n slots takes n/expireStep claims, which add at most as many
// records, so in a steady state expired records that wait for the pass are
// at most a seventh of the live ones.
const expireStep = 8

// rec returns the record in slot i. s.mu must be held.
func (s *Store) rec(i uint32) *record { return &s.pages[i>>pageBits][i&(pageSize-1)] }

// slots returns the number of slots, free or not. s.mu must be held.
func (s *Store) slots() uint32 { return uint32(len(s.pages)) << pageBits }

// slot returns the lowest free slot, adding a page if none is free. Taking
// the lowest leaves the last pages to empty as their records expire, for
// trim to give back. s.mu must be held.
func (s *Store) slot() uint32 {
	if i, ok := s.free.min(); ok {
		s.free.remove(i)
		return i
	}
	if len(s.pages) == maxPages {
		panic("memdedupe: 2^32-1 records")
	}
	first := s.slots()
	s.pages = append(s.pages, new(page))
	for i := first + 1; i < s.slots(); i++ {
		s.free.add(i)
	}
	return first
}

// drop deletes the record in slot i and frees the slot. s.mu must be held.
func (s *Store) drop(i uint32) {
	r := s.rec(i)
	s.unfile(r.hash, i)
	*r = record{}
	s.free.add(i)
}

// expire examines the next expireStep slots, in slot order from where the
// last call stopped, and drops the expired records there; then it gives
// back the last page if all its slots are free. s.mu must be held.
func (s *Store) expire(now time.Time) {
	for range expireStep {
		if s.hand >= s.slots() {
			if s.hand = 0; len(s.pages) == 0 {
				return
			}
		}
		if r := s.rec(s.hand); r.seq != 0 && !now.Before(r.until) {
			s.drop(s.hand)
		}
		s.hand++
	}
	s.trim()
}

// trim gives back the last page if all its slots are free: one page per
// call, so that a call after a burst has expired does not free every page
// of it. s.mu must be held.
func (s *Store) trim() {
	n := len(s.pages) - 1
	if n < 0 {
		return
	}
	first := uint32(n) << pageBits
	if !s.free.all(first, pageSize) {
		return
	}
	for i := first; i < first+pageSize; i++ {
		s.free.remove(i)
	}
	s.pages[n] = nil
	s.pages = s.pages[:n]
}

// slotSet is a set of slot numbers that finds its lowest in a few word
// reads: lv[0] has a bit per slot, and each level above a bit per word
// below it that is not zero. The top level is read word by word, one per
// 2^18 slots: 4 at a million.
type slotSet struct{ lv [3][]uint64 }

func (f *slotSet) add(i uint32) {
	for l := range f.lv {
		w := int(i / 64)
		if n := w + 1 - len(f.lv[l]); n > 0 {
			f.lv[l] = append(f.lv[l], make([]uint64, n)...)
		}
		was := f.lv[l][w]
		f.lv[l][w] = was | 1<<(i%64)
		if was != 0 {
			return // the levels above know the word
		}
		i = uint32(w)
	}
}

func (f *slotSet) remove(i uint32) {
	for l := range f.lv {
		w := i / 64
		if f.lv[l][w] &^= 1 << (i % 64); f.lv[l][w] != 0 {
			return
		}
		i = w
	}
}

// min returns the lowest slot in the set, or false if it is empty.
func (f *slotSet) min() (uint32, bool) {
	for w, x := range f.lv[2] {
		if x != 0 {
			i := uint32(w)*64 + uint32(bits.TrailingZeros64(x))
			i = i*64 + uint32(bits.TrailingZeros64(f.lv[1][i]))
			return i*64 + uint32(bits.TrailingZeros64(f.lv[0][i])), true
		}
	}
	return 0, false
}

// all reports whether the set holds the n slots from first, both multiples
// of 64.
func (f *slotSet) all(first, n uint32) bool {
	words := f.lv[0]
	if int((first+n)/64) > len(words) {
		return false
	}
	for _, x := range words[first/64 : (first+n)/64] {
		if x != math.MaxUint64 {
			return false
		}
	}
	return true
}
