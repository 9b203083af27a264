package redisdedupe_test

import (
	"crypto/rand"
	"fmt"
	"os"
	"testing"
	"time"

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

// paths are the two ways a Store claims, both run on the test server (a
// Redis 7): by native commands, as on Redis 7.0 or later, and by the claim
// script, as before 7.0.
var paths = []struct {
	name string
	use  func(*redisdedupe.Store)
}{
	{"Native", func(*redisdedupe.Store) {}},
	{"Scripts", redisdedupe.UseScripts},
}

// features are what the conformance suite expects of a Store.
var features = dedupetest.Features{Inspector: true, UnorderedList: true, KeepsTrace: true}

// unreachable returns a store, on use's path, whose Redis cannot be
// reached.
func unreachable(use func(*redisdedupe.Store)) func(t *testing.T) (dedupe.Store, string, string) {
	return func(t *testing.T) (dedupe.Store, string, string) {
		client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
		t.Cleanup(func() { client.Close() })
		s, err := redisdedupe.New(client, redisdedupe.Config{})
		if err != nil {
			t.Fatal(err)
		}
		use(s)
		return s, "redisdedupe", "127.0.0.1:1"
	}
}

// TestConformance runs the suite on both paths: the native one on the
// shared test server, among the records of every package's tests, and the
// script path on a Redis of its own, where the Inspector's tests, which
// scan every key of the server, take seconds rather than minutes.
func TestConformance(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			client := newClient(t)
			if p.name == "Scripts" {
				client = redis.NewClient(&redis.Options{Addr: testenv.StartPrivateRedis(t).Addr()})
				t.Cleanup(func() { client.Close() })
			}
			s, err := redisdedupe.New(client, redisdedupe.Config{})
			if err != nil {
				t.Fatal(err)
			}
			p.use(s)
			f := features
			f.LostAnswer, f.Unreachable = lostAnswer(p.use), unreachable(p.use)
			dedupetest.RunConformanceTests(t, func(*testing.T) dedupe.Store { return s }, f)
		})
	}
}

// lostAnswer returns the suite's store, on use's path, whose client talks
// to Redis through a proxy that drops a reply when armed: go-redis then
// sends the command again on a new connection (MaxRetries, 3 by default).
func lostAnswer(use func(*redisdedupe.Store)) func(t *testing.T) (dedupe.Store, func(string) func() bool) {
	return func(t *testing.T) (dedupe.Store, func(string) func() bool) {
		proxy := testenv.StartDropProxy(t, testenv.Redis(t))
		client := redis.NewClient(&redis.Options{Addr: proxy.Addr()})
		t.Cleanup(func() { client.Close() })
		prefix := "lost:" + rand.Text() + ":"
		s, err := redisdedupe.New(client, redisdedupe.Config{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		use(s)
		return s, func(ns string) func() bool {
			before := proxy.Dropped()
			proxy.Arm(prefix + "{" + ns + ":") // in this claim's keys only
			return func() bool { return proxy.Dropped() > before }
		}
	}
}
