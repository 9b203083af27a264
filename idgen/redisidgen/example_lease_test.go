package redisidgen_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/idgen/redisidgen"
	"github.com/idemq/idemq/msgkey"
)

// A sending process takes its message keys from a generator on a node id
// leased from a pool in Redis (the dedupe store's Redis will do), so that
// no two senders ever stamp the same key.
func ExampleLease() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer client.Close()

	gen, err := redisidgen.Lease(ctx, client, "senders")
	if err != nil {
		log.Fatal(err)
	}
	defer gen.Close() // releases the node
	keys := msgkey.FromIDs(gen)

	key, err := keys.NextKey(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(msgkey.Validate(key) == nil)
	// Output: true
}
