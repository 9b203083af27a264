package scramble_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/scramble"
)

var testKey = []byte("0123456789abcdef")

func newScrambler(t testing.TB, key []byte, bits int) *scramble.Scrambler {
	t.Helper()
	s, err := scramble.New(key, bits)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestScramblerRoundTrip scrambles IDs of several widths, every one of the
// small widths: each stays in range and unscrambles to itself, so no two
// share a scrambled form and none is lost.
func TestScramblerRoundTrip(t *testing.T) {
	for _, bits := range []int{2, 3, 9, 12, 41, 53, 63} {
		t.Run(fmt.Sprint(bits), func(t *testing.T) {
			s := newScrambler(t, testKey, bits)
			r := rand.New(rand.NewPCG(1, uint64(bits)))
			limit := uint64(1) << bits
			ids := []uint64{0, 1, limit - 1, limit / 2}
			for i := range min(limit, 1<<12) {
				if limit > 1<<12 {
					i = r.Uint64N(limit)
				}
				ids = append(ids, i)
			}
			for _, v := range ids {
				sc, err := s.Scramble(int64(v))
				if err != nil || sc < 0 || uint64(sc) >= limit {
					t.Fatalf("Scramble(%d) = %d, %v; want a value below 2^%d", v, sc, err, bits)
				}
				back, err := s.Unscramble(sc)
				if err != nil || uint64(back) != v {
					t.Fatalf("Unscramble(Scramble(%d)) = %d, %v", v, back, err)
				}
			}
		})
	}
}

// TestScramblerHidesOrder checks what a user relies on: consecutive IDs
// come out unrelated and unordered, and another key gives other values.
func TestScramblerHidesOrder(t *testing.T) {
	s := newScrambler(t, testKey, 63)
	other := newScrambler(t, bytes.Repeat([]byte{7}, 32), 63)
	const n = 1000
	base := int64(1) << 50
	var ascending, same int
	prev, _ := s.Scramble(base)
	for i := range int64(n) {
		a, _ := s.Scramble(base + i + 1)
		b, _ := other.Scramble(base + i + 1)
		if a > prev {
			ascending++
		}
		if a == b {
			same++
		}
		prev = a
	}
	// About half ascend by chance; an order-preserving map would give n.
	if ascending < n/3 || ascending > 2*n/3 {
		t.Errorf("%d of %d consecutive IDs scrambled in ascending order; want about half", ascending, n)
	}
	if same > 0 {
		t.Errorf("%d of %d IDs scramble alike under two keys", same, n)
	}
}

func TestScramblerErrors(t *testing.T) {
	tests := []struct {
		name string
		key  []byte
		bits int
		want error
	}{
		{"KeyTooShort", []byte("short"), 63, idgen.ErrInvalidConfig},
		{"NoKey", nil, 63, idgen.ErrInvalidConfig},
		{"OneBit", testKey, 1, idgen.ErrInvalidConfig},
		{"SixtyFourBits", testKey, 64, idgen.ErrInvalidConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := scramble.New(tt.key, tt.bits); !errors.Is(err, tt.want) {
				t.Errorf("New = %v, want %v", err, tt.want)
			}
		})
	}
	s := newScrambler(t, testKey, 53)
	for _, id := range []int64{-1, 1 << 53, int64(1<<63 - 1)} {
		if _, err := s.Scramble(id); !errors.Is(err, idgen.ErrRange) {
			t.Errorf("Scramble(%d) = %v, want ErrRange", id, err)
		}
		if _, err := s.Unscramble(id); !errors.Is(err, idgen.ErrRange) {
			t.Errorf("Unscramble(%d) = %v, want ErrRange", id, err)
		}
	}
}

func FuzzScrambler(f *testing.F) {
	f.Add([]byte("0123456789abcdef"), 63, int64(12345))
	f.Add(bytes.Repeat([]byte{1}, 32), 9, int64(511))
	f.Fuzz(func(t *testing.T, key []byte, bits int, v int64) {
		s, err := scramble.New(key, bits)
		if err != nil {
			if !errors.Is(err, idgen.ErrInvalidConfig) {
				t.Fatalf("New error %v does not wrap ErrInvalidConfig", err)
			}
			return
		}
		sc, err := s.Scramble(int64(v))
		if err != nil {
			if !errors.Is(err, idgen.ErrRange) || (v >= 0 && v < 1<<bits) {
				t.Fatalf("Scramble(%d) over %d bits: %v", v, bits, err)
			}
			return
		}
		if back, err := s.Unscramble(sc); err != nil || int64(back) != v {
			t.Fatalf("Unscramble(Scramble(%d)) = %d, %v", v, back, err)
		}
	})
}

func BenchmarkScramble(b *testing.B) {
	s := newScrambler(b, testKey, 63)
	for i := 0; b.Loop(); i++ {
		if _, err := s.Scramble(int64(i)); err != nil {
			b.Fatal(err)
		}
	}
}
