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

// Every sending process leases its node id from one pool for as long as it
// runs, so no two processes ever issue IDs with the same node. The same
// Redis as the dedupe store will do.
func Example_generator() {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer client.Close()

	leaser, err := redisidgen.New(client, redisidgen.Config{
		Pool: "senders",                   // one pool per layout and fleet
		Size: idgen.Twitter.MaxNode() + 1, // node ids 0-1023
	})
	if err != nil {
		log.Fatal(err)
	}
	gen, err := idgen.NewLeased(ctx, leaser, idgen.Config{
		// A clock behind the node's last holder is waited out.
		Rollback: idgen.Wait{Max: time.Second},
	}, idgen.LeaseConfig{
		// A full pool, or one Redis has no record of (see the package
		// documentation), is waited for as long as ctx allows.
		Wait: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	// Close releases the node with the time of its last ID.
	defer gen.Close()

	id, err := gen.Next(ctx)
	if err != nil {
		log.Fatal(err) // wraps idgen.ErrLeaseLost if the lease could not be renewed
	}
	fmt.Println("node", gen.Config().Layout.Decode(id).Node)
	// Output: node 0
}
