package dedupekit_test

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash/crc64"
	"hash/fnv"
	"testing"

	"github.com/idemq/idemq/internal/dedupekit"
)

// BenchmarkFingerprint compares Fingerprint with the hex SHA-256 that
// earlier versions recorded and with the 64-bit hashes it was chosen over,
// each encoded as 16 hex digits, for a small and a large message body.
func BenchmarkFingerprint(b *testing.B) {
	ecma := crc64.MakeTable(crc64.ECMA)
	hex64 := func(v uint64) string {
		var buf [8]byte
		binary.BigEndian.PutUint64(buf[:], v)
		return hex.EncodeToString(buf[:])
	}
	fps := []struct {
		name string
		fp   func([]byte) string
	}{
		{"idemq", dedupekit.Fingerprint},
		{"sha256", func(p []byte) string {
			sum := sha256.Sum256(p)
			return hex.EncodeToString(sum[:])
		}},
		{"fnv1a", func(p []byte) string {
			h := fnv.New64a()
			h.Write(p)
			return hex64(h.Sum64())
		}},
		{"crc64", func(p []byte) string { return hex64(crc64.Checksum(p, ecma)) }},
	}
	for _, size := range []struct {
		name string
		n    int
	}{{"200B", 200}, {"4KiB", 4096}} {
		body := make([]byte, size.n)
		for i := range body {
			body[i] = byte(i * 7)
		}
		for _, f := range fps {
			b.Run(size.name+"/"+f.name, func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					f.fp(body)
				}
			})
		}
	}
}
