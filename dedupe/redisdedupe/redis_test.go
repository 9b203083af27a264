package redisdedupe_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/dedupetest"
	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/internal/testenv"
)

func TestMain(m *testing.M) {
	code := testenv.Run(m)
	// The store starts no goroutines; the clients the tests closed must
	// have stopped theirs too.
	if err := goleak.Find(); code == 0 && err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// newClient returns a client of the test Redis, closed when t ends.
func newClient(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: testenv.Redis(t)})
	t.Cleanup(func() { c.Close() })
	return c
}

func newStore(t testing.TB, cfg redisdedupe.Config) *redisdedupe.Store {
	s, err := redisdedupe.New(newClient(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	dedupetest.Run(t, func(t *testing.T) dedupe.Store {
		return newStore(t, redisdedupe.Config{})
	}, dedupetest.Features{Batcher: true, Inspector: true, UnorderedList: true})
}
