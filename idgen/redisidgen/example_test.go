package redisidgen_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/redisidgen"
)

// A process leases a node id from a pool that all hosts share, renews it
// with the time of the last ID it issued, and releases it when it stops.
// The client is the caller's: the Leaser never closes it.
func Example() {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer client.Close()

	layout := idgen.Twitter
	leaser, err := redisidgen.New(client, redisidgen.Config{Pool: "orders", Size: layout.MaxNode() + 1})
	if err != nil {
		log.Fatal(err)
	}
	// Once, when the pool is set up, before any generator runs: see
	// the package documentation.
	if err := leaser.Create(ctx); err != nil {
		log.Fatal(err)
	}

	lease, err := leaser.Acquire(ctx, idgen.LeaseRequest{MaxNode: layout.MaxNode(), Owner: "host-a pid 4242"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("node %d for %v, first holder: %v\n", lease.Node, lease.TTL, lease.HighWater.IsZero())

	lastID := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	if lease, err = leaser.Renew(ctx, lease, lastID); err != nil {
		log.Fatal(err)
	}
	leases, err := leaser.List(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, li := range leases {
		fmt.Printf("node %d held by %q, high water %s\n", li.Node, li.Owner, li.HighWater.Format(time.RFC3339))
	}

	if err := leaser.Release(ctx, lease, lastID); err != nil {
		log.Fatal(err)
	}
	// Never-used ids come first; node 0 waits at the tail.
	next, err := leaser.Acquire(ctx, idgen.LeaseRequest{MaxNode: layout.MaxNode(), Owner: "host-b"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("next holder gets node", next.Node)
	// Output:
	// node 0 for 10s, first holder: true
	// node 0 held by "host-a pid 4242", high water 2026-05-01T12:00:00Z
	// next holder gets node 1
}
