// Package scramble turns sequential IDs into non-guessable ones with a
// keyed permutation: shown outside (URLs, order numbers), a scrambled ID
// reveals neither the time, node, sequence nor order of the original, and
// the key turns it back. It works on any non-negative integer IDs below
// 2^bits: snowflake IDs (bits = the sum of the layout's widths: 63 for
// idgen.Twitter, 53 for idgen.JSSafe) or segment IDs.
//
//	s, err := scramble.New(key, 63)
//	public, err := s.Scramble(int64(id))
//	back, err := s.Unscramble(public)
//
// [New] takes the key and the width; there are no other settings. Errors
// wrap idgen's sentinels: [idgen.ErrInvalidConfig] for a key or width New
// refuses, [idgen.ErrRange] for an ID outside [0, 2^bits). It is not
// encryption of a secret: see [Scrambler] for what it hides.
package scramble

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"fmt"

	"github.com/idemq/idemq/idgen"
)

// A Scrambler is a keyed permutation of the IDs below 2^bits:
// [Scrambler.Scramble] maps each such ID to another, and
// [Scrambler.Unscramble], with the same key, gives the original back. Show
// the scrambled form outside and keep the original inside: it still decodes
// and sorts by time.
//
// It is an 8-round Feistel network whose round function is AES under the
// key, over the smallest even width that holds bits, walked until the
// result is below 2^bits again; so a scrambled ID fits the same width as
// the original (a JavaScript-safe layout's IDs stay JavaScript-safe).
//
// What it protects: without the key, a scrambled ID shows nothing of the
// original's time, node or sequence, and neighbouring IDs look unrelated,
// so nobody can count a shop's orders or guess the next ID from one seen.
// What it does not: it is deterministic (one ID always scrambles alike, so
// scrambled IDs are as linkable as the originals), it is not an
// authenticated encryption (any value in range unscrambles to some ID:
// check that the ID exists), and its strength is that of a small block
// cipher (an adversary who learns very many original/scrambled pairs of
// one key gains an advantage; 63-bit widths make that impractical, small
// widths do not). The key is a secret, and changing it changes every
// scrambled ID already handed out.
//
// A Scrambler is safe for concurrent use.
type Scrambler struct {
	block cipher.Block
	bits  uint
	half  uint   // width of each Feistel half
	mask  uint64 // the low half bits
}

// scrambleRounds is the number of Feistel rounds: four make a strong
// pseudo-random permutation in theory; more keep the bounds comfortable
// at the small half widths short layouts give.
const scrambleRounds = 8

// New returns a Scrambler of the IDs below 2^bits under key, 16, 24 or 32
// secret bytes (an AES key). bits is usually the sum of a snowflake
// layout's widths; it must be 2 to 63.
func New(key []byte, bits int) (*Scrambler, error) {
	if bits < 2 || bits > 63 {
		return nil, fmt.Errorf("%w: scrambler over %d bits, want 2 to 63", idgen.ErrInvalidConfig, bits)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("%w: scrambler key of %d bytes, want 16, 24 or 32 secret bytes", idgen.ErrInvalidConfig, len(key))
	}
	half := uint(bits+1) / 2
	return &Scrambler{block: block, bits: uint(bits), half: half, mask: 1<<half - 1}, nil
}

// Scramble returns id's scrambled form, below 2^bits too. An id outside
// [0, 2^bits) gives an error wrapping [idgen.ErrRange].
func (s *Scrambler) Scramble(id int64) (int64, error) {
	return s.walk(id, s.forward)
}

// Unscramble returns the ID whose scrambled form is id. An id outside
// [0, 2^bits) gives an error wrapping [idgen.ErrRange].
func (s *Scrambler) Unscramble(id int64) (int64, error) {
	return s.walk(id, s.backward)
}

// walk applies f until the value is below 2^bits again (cycle walking):
// f permutes the wider even width, so this permutes [0, 2^bits), and its
// inverse walks back the same cycle.
func (s *Scrambler) walk(id int64, f func(uint64, *[aes.BlockSize]byte) uint64) (int64, error) {
	if id < 0 || uint64(id) >= 1<<s.bits {
		return 0, fmt.Errorf("%w: %d is not below 2^%d", idgen.ErrRange, id, s.bits)
	}
	// One buffer for every round: the block cipher's interface makes it
	// escape to the heap.
	buf := new([aes.BlockSize]byte)
	x := uint64(id)
	for {
		if x = f(x, buf); x < 1<<s.bits {
			return int64(x), nil
		}
	}
}

func (s *Scrambler) forward(x uint64, buf *[aes.BlockSize]byte) uint64 {
	l, r := x>>s.half, x&s.mask
	for i := range scrambleRounds {
		l, r = r, l^s.round(i, r, buf)
	}
	return l<<s.half | r
}

func (s *Scrambler) backward(x uint64, buf *[aes.BlockSize]byte) uint64 {
	l, r := x>>s.half, x&s.mask
	for i := scrambleRounds - 1; i >= 0; i-- {
		l, r = r^s.round(i, l, buf), l
	}
	return l<<s.half | r
}

// round is the round function: AES of the round number and v, cut to a
// half's width.
func (s *Scrambler) round(i int, v uint64, buf *[aes.BlockSize]byte) uint64 {
	binary.BigEndian.PutUint64(buf[:8], uint64(i))
	binary.BigEndian.PutUint64(buf[8:], v)
	s.block.Encrypt(buf[:], buf[:])
	return binary.BigEndian.Uint64(buf[:8]) & s.mask
}
