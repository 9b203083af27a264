package memdedupe

import "github.com/idemq/idemq/dedupe"

// The hash table is extendible hashing, as Go's own maps grow since Go
// 1.24: a directory of tables, found by the top bits of a Ref's hash, each
// at most maxCells cells, so that growing or shrinking rehashes a table or
// two, never the whole store's (20 ms to 60 ms for two million cells). A full table of maxCells splits in two by the
// next bit of its hashes, doubling the directory when it is as deep; two
// buddies, the tables that differ in the last bit of their prefix, merge
// when both are nearly empty, halving the directory when no table is as
// deep as it.
//
// A table is a power of two cells, at most maxLoad of them in use so that
// probe runs stay short, with linear probing from the low bits of the
// hash. A cell is 0 when empty, else the low half of its Ref's hash, which
// places it, then its record's slot plus one: eight bytes and no pointer,
// so that a table is small, cheap to rehash and not scanned by the garbage
// collector.
const (
	minCells = 64
	maxCells = 1 << 12
)

// table is one table of the directory.
type table struct {
	cells  []uint64
	used   int
	depth  uint   // the top depth bits of its cells' hashes are prefix
	prefix uint32 // and it fills dir[prefix<<(s.depth-depth):][:1<<(s.depth-depth)]
}

func newTable(cells int, depth uint, prefix uint32) *table {
	return &table{cells: make([]uint64, cells), depth: depth, prefix: prefix}
}

// capacity is how many records n cells hold: maxLoad, three quarters.
func capacity(n int) int { return n / 4 * 3 }

// cellsFor returns the cells of a table made for n records: half full, so
// that it neither grows nor shrinks soon.
func cellsFor(n int) int {
	c := minCells
	for capacity(c)/2 < n {
		c *= 2
	}
	return c
}

// lookup returns the slot of ref's record, found by its hash h, or, if it
// has none, the table and the empty cell where it goes. s.mu must be held.
func (s *Store) lookup(h uint32, ref dedupe.Ref) (t *table, cell int, slot uint32, found bool) {
	// A shift by 32, at depth 0, gives 0.
	t = s.dir[h>>(32-s.depth)]
	mask := len(t.cells) - 1
	for p := int(h) & mask; ; p = (p + 1) & mask {
		c := t.cells[p]
		if c == 0 {
			return t, p, 0, false
		}
		if uint32(c>>32) == h {
			if i := uint32(c) - 1; s.rec(i).ref == ref {
				return t, p, i, true
			}
		}
	}
}

// file puts slot i, whose Ref hashes to h, in the empty cell p of t that
// lookup returned, and grows t if that puts it past maxLoad. s.mu must be
// held.
func (s *Store) file(t *table, p int, h uint32, i uint32) {
	t.cells[p] = uint64(h)<<32 | uint64(i+1)
	t.used++
	s.used++
	if t.used > capacity(len(t.cells)) {
		s.grow(t)
	}
}

// grow doubles t while it is smaller than maxCells, else splits it. Hashes
// that all agree in the bit a split goes by (only tests make them) cannot
// be split: t doubles past maxCells instead. s.mu must be held.
func (s *Store) grow(t *table) {
	if len(t.cells) < maxCells || t.depth == 32 {
		t.resize(2 * len(t.cells))
		return
	}
	bit := uint32(1) << (31 - t.depth)
	hi := 0
	for _, c := range t.cells {
		if c != 0 && uint32(c>>32)&bit != 0 {
			hi++
		}
	}
	if hi == 0 || hi == t.used {
		t.resize(2 * len(t.cells))
		return
	}
	// A half holds at most capacity(maxCells) records: t overflowed by one.
	l := newTable(min(cellsFor(t.used-hi), maxCells), t.depth+1, t.prefix<<1)
	r := newTable(min(cellsFor(hi), maxCells), t.depth+1, t.prefix<<1|1)
	l.used, r.used = t.used-hi, hi
	for _, c := range t.cells {
		switch {
		case c == 0:
		case uint32(c>>32)&bit != 0:
			r.put(c)
		default:
			l.put(c)
		}
	}
	if t.depth == s.depth {
		d := make([]*table, 2*len(s.dir))
		for j, u := range s.dir {
			d[2*j], d[2*j+1] = u, u
		}
		s.dir, s.depth, s.top = d, s.depth+1, 0
	}
	s.point(l)
	s.point(r)
	if l.depth == s.depth {
		s.top += 2
	}
}

// shrink merges t with its buddy if together they hold no more than a
// quarter of what a table of maxCells holds, or else halves t, or more,
// once it is a quarter as full as it may be, so that memory follows the
// records. s.mu must be held.
func (s *Store) shrink(t *table) {
	if t.depth > 0 {
		b := s.dir[(t.prefix^1)<<(s.depth-t.depth)]
		if b.depth == t.depth && t.used+b.used <= capacity(maxCells)/4 {
			m := newTable(cellsFor(t.used+b.used), t.depth-1, t.prefix>>1)
			m.used = t.used + b.used
			for _, c := range t.cells {
				if c != 0 {
					m.put(c)
				}
			}
			for _, c := range b.cells {
				if c != 0 {
					m.put(c)
				}
			}
			if t.depth == s.depth {
				s.top -= 2
			}
			s.point(m)
			for s.top == 0 && s.depth > 0 {
				s.halve()
			}
			return
		}
	}
	if len(t.cells) > minCells && t.used <= capacity(len(t.cells))/4 {
		t.resize(cellsFor(t.used))
	}
}

// halve halves the directory, which no table is as deep as, so that every
// table fills an even run of it. s.mu must be held.
func (s *Store) halve() {
	d := make([]*table, len(s.dir)/2)
	for j := range d {
		d[j] = s.dir[2*j]
	}
	s.dir, s.depth, s.top = d, s.depth-1, 0
	for _, t := range d {
		if t.depth == s.depth {
			s.top++ // a table as deep as the directory fills one entry
		}
	}
}

// point points t's run of the directory at t. s.mu must be held.
func (s *Store) point(t *table) {
	shift := s.depth - t.depth
	run := s.dir[t.prefix<<shift:][:1<<shift]
	for j := range run {
		run[j] = t
	}
}

// resize moves t to n cells.
func (t *table) resize(n int) {
	old := t.cells
	t.cells = make([]uint64, n)
	for _, c := range old {
		if c != 0 {
			t.put(c)
		}
	}
}

// put puts cell c in the first empty cell of t from its home on.
func (t *table) put(c uint64) {
	mask := len(t.cells) - 1
	p := int(c>>32) & mask
	for t.cells[p] != 0 {
		p = (p + 1) & mask
	}
	t.cells[p] = c
}

// unfile takes slot i, whose Ref hashes to h, out of its table, moving
// back the cells after it in its probe run that lookup would no longer
// reach past the gap, then shrinks the table if it has become too empty.
// s.mu must be held.
func (s *Store) unfile(h uint32, i uint32) {
	t := s.dir[h>>(32-s.depth)]
	mask := len(t.cells) - 1
	p := int(h) & mask
	for uint32(t.cells[p]) != i+1 {
		p = (p + 1) & mask
	}
	for q := p; ; {
		t.cells[p] = 0
		// Find the next cell of the run that may fill the gap at p: one
		// whose home, where its probe starts, is not in (p, q].
		for {
			q = (q + 1) & mask
			c := t.cells[q]
			if c == 0 {
				t.used--
				s.used--
				s.shrink(t)
				return
			}
			home := int(c>>32) & mask
			if p <= q && (home <= p || home > q) || p > q && home <= p && home > q {
				t.cells[p] = c
				p = q
				break
			}
		}
	}
}
