package redisidgen_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/leasetest"
	"github.com/idemq/idemq/idgen/redisidgen"
	"github.com/idemq/idemq/idgen/segment/segmenttest"
	"github.com/idemq/idemq/internal/fleettest"
	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testenv"
)

// redisAddr is a Redis of the examples' own, empty when they start.
var redisAddr string

func TestMain(m *testing.M) {
	racechild.Main(fleettest.Roles(newChildLeaser, newChildSegments))
	os.Exit(run(m))
}

func run(m *testing.M) int {
	r, err := testenv.NewPrivateRedis(context.Background())
	if err != nil {
		// Examples cannot skip: as testenv.Missing does for tests, the
		// package is skipped where Redis is missing, and fails under CI.
		fmt.Fprintf(os.Stderr, "redisidgen: no Redis for the examples: %v\n", err)
		if os.Getenv("CI") == "true" {
			return 1
		}
		return 0
	}
	redisAddr = r.Addr()
	// Example_generator's pool exists, as in a deployment past its first
	// start, so that it does not wait out the fence of a new pool.
	if err := createPool(redisidgen.Config{Pool: "senders", Size: 1024}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := testenv.Run(m)
	if err := r.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	// The Leaser starts no goroutines; the clients and proxies the tests
	// closed must have stopped theirs too.
	if err := goleak.Find(); code == 0 && err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	return code
}

func createPool(cfg redisidgen.Config) error {
	c := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer c.Close()
	l, err := redisidgen.New(c, cfg)
	if err != nil {
		return err
	}
	return l.Create(context.Background())
}

// newClient returns a client of the test Redis, closed when t ends.
func newClient(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	return c
}

func newLeaser(t testing.TB, c redis.UniversalClient, cfg redisidgen.Config) *redisidgen.Leaser {
	t.Helper()
	l, err := redisidgen.New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// conformance returns the suite's newLeaser over c: the first leaser of a
// pool creates it, so that it grants at once.
func conformance(c redis.UniversalClient) func(*testing.T, leasetest.Pool) idgen.Leaser {
	return func(t *testing.T, p leasetest.Pool) idgen.Leaser {
		l := newLeaser(t, c, redisidgen.Config{Pool: p.Name, Size: p.Size, Lease: p.TTL, Namespace: "leasetest"})
		if err := l.Create(t.Context()); err != nil && !errors.Is(err, redisidgen.ErrPoolExists) {
			t.Fatal(err)
		}
		return l
	}
}

// owner reads the owner of node's live lease from List.
func owner(ctx context.Context, l idgen.Leaser, node int64) (string, error) {
	infos, err := l.(*redisidgen.Leaser).List(ctx)
	for _, li := range infos {
		if li.Node == node {
			return li.Owner, err
		}
	}
	return "", err
}

func TestConformance(t *testing.T) {
	leasetest.Run(t, conformance(newClient(t, testenv.Redis(t))), owner)
}

func TestConfig(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	for _, tc := range []struct {
		name string
		cfg  redisidgen.Config
		want string // in the error; "" for none
	}{
		{"Defaults", redisidgen.Config{Pool: "p", Size: 1024}, ""},
		{"Largest", redisidgen.Config{Pool: "p", Size: redisidgen.MaxSize, Lease: 10 * time.Millisecond}, ""},
		{"NoPool", redisidgen.Config{Size: 1024}, "Config.Pool"},
		{"NoSize", redisidgen.Config{Pool: "p"}, "Config.Size is 0"},
		{"NegativeSize", redisidgen.Config{Pool: "p", Size: -1}, "Config.Size is -1"},
		{"SizeBeyondLayouts", redisidgen.Config{Pool: "p", Size: redisidgen.MaxSize + 1}, "more than 2^53"},
		{"ShortLease", redisidgen.Config{Pool: "p", Size: 8, Lease: time.Millisecond}, "Config.Lease 1ms is below"},
		{"NegativeLease", redisidgen.Config{Pool: "p", Size: 8, Lease: -time.Second}, "Config.Lease -1s is below"},
		{"FractionalLease", redisidgen.Config{Pool: "p", Size: 8, Lease: 10*time.Millisecond + 500*time.Microsecond}, "not whole milliseconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := redisidgen.New(c, tc.cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("New = %v", err)
			case tc.want == "":
			case !errors.Is(err, idgen.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want):
				t.Fatalf("New = %v, want ErrInvalidConfig naming %q", err, tc.want)
			}
		})
	}
	if _, err := redisidgen.New(nil, redisidgen.Config{Pool: "p", Size: 1}); err == nil {
		t.Error("New with a nil client succeeded")
	}
}

// TestKeys checks that pools whose names differ only where the hash tag is
// delimited get keys of their own, all in one slot.
func TestKeys(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	seen := map[string]string{}
	for _, tc := range []struct{ ns, pool, wantMeta string }{
		{"", "orders", "{idemq:orders}:meta"},
		{"a:b", "c", "{a%3Ab:c}:meta"},
		{"a", "b:c", "{a:b%3Ac}:meta"},
		{"a", "{b}", "{a:%7Bb%7D}:meta"},
		{"a", "%7Bb%7D", "{a:%257Bb%257D}:meta"},
	} {
		l := newLeaser(t, c, redisidgen.Config{Namespace: tc.ns, Pool: tc.pool, Size: 1})
		keys := redisidgen.PoolKeys(l)
		if keys[0] != tc.wantMeta {
			t.Errorf("namespace %q pool %q: meta key %q, want %q", tc.ns, tc.pool, keys[0], tc.wantMeta)
		}
		tag := keys[0][:strings.IndexByte(keys[0], '}')+1]
		for _, k := range keys {
			if !strings.HasPrefix(k, tag) || strings.Count(k, "{") != 1 {
				t.Errorf("key %q is not in the pool's hash tag %s", k, tag)
			}
			if other, dup := seen[k]; dup {
				t.Errorf("key %q shared by %s and %s/%s", k, other, tc.ns, tc.pool)
			}
			seen[k] = tc.ns + "/" + tc.pool
		}
	}
}

// TestUnreachable checks that a Redis that does not answer gives a plain
// error naming the pool and the cause, not a sentinel; and that Segments'
// calls fail as segmenttest.Unreachable wants.
func TestUnreachable(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: time.Second, MaxRetries: 1})
	defer c.Close()
	l := newLeaser(t, c, redisidgen.Config{Pool: "orders", Size: 32})
	_, err := l.Acquire(t.Context(), idgen.LeaseRequest{MaxNode: 31})
	if err == nil {
		t.Fatal("Acquire succeeded without a server")
	}
	for _, s := range []error{idgen.ErrNoFreeNode, idgen.ErrLeaseLost, idgen.ErrInvalidConfig} {
		if errors.Is(err, s) {
			t.Errorf("Acquire = %v: a sentinel for an unknown outcome", err)
		}
	}
	if msg := err.Error(); !strings.Contains(msg, `redisidgen: acquire in pool "orders"`) || !strings.Contains(msg, "connection refused") {
		t.Errorf("Acquire = %v, want the pool and the cause", err)
	}
	segmenttest.Unreachable(t, newSegments(t, c, ""), "127.0.0.1:1")
}
