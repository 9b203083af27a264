package redisdedupe_test

import (
	"crypto/rand"
	"testing"

	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/internal/testkit"
)

// BenchmarkInspect measures the Inspector over 5 groups of 2000 records.
// List and Stats scan every key of the server, so their cost grows with
// the keys other tests left there too; keys reports how many there were.
func BenchmarkInspect(b *testing.B) {
	client := newClient(b)
	s, err := redisdedupe.New(client, redisdedupe.Config{})
	if err != nil {
		b.Fatal(err)
	}
	testkit.BenchInspector(b, s, "bench-"+rand.Text(), 5, 2000)
	n, err := client.DBSize(b.Context()).Result()
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d keys on the server", n)
}
