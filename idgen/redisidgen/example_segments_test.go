package redisidgen_test

import (
	"context"
	"fmt"
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/idgen/redisidgen"
	"github.com/idemq/idemq/idgen/segment"
)

// An operator creates a tag; each NextSegment reserves the next step of its
// counter, or a step of the caller's, in one script run. The tag's hash
// holds Leaf's columns.
func ExampleNewSegments() {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer client.Close()

	src, err := redisidgen.NewSegments(client, "")
	if err != nil {
		log.Fatal(err)
	}
	if err := src.CreateTag(ctx, segment.Tag{Tag: "invoices", MaxID: 1, Step: 1000}); err != nil {
		log.Fatal(err)
	}
	for _, step := range []int64{0, 0, 5000} {
		seg, err := src.NextSegment(ctx, "invoices", step)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("[%d, %d)\n", seg.Start, seg.End)
	}
	maxID, err := client.HGet(ctx, "{idemq:invoices}:segment", "max_id").Result()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("{idemq:invoices}:segment max_id", maxID)
	// Output:
	// [1, 1001)
	// [1001, 2001)
	// [2001, 7001)
	// {idemq:invoices}:segment max_id 7001
}
