package redisdedupe_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/redisdedupe"
)

// A Guard over Redis. The client is the caller's: close it when done; the
// store never does.
func Example() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer client.Close()
	store, err := redisdedupe.New(client, redisdedupe.Config{Prefix: "shop:dedupe:"})
	if err != nil {
		fmt.Println(err)
		return
	}
	guard, err := dedupe.NewGuard(dedupe.WithDoneCache(store, 10_000), dedupe.GuardConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ref := dedupe.Ref{Group: "billing", Key: "order-1004"}
	outcome, err := guard.Do(context.Background(), ref, "", func(ctx context.Context) error {
		return nil // apply the message's effects here
	})
	fmt.Println(outcome, err)
}
