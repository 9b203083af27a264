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
	guard, err := dedupe.NewGuard(store, dedupe.GuardConfig{DoneCache: 10_000})
	if err != nil {
		fmt.Println(err)
		return
	}
	msg := []dedupe.Item{{Ref: dedupe.Ref{Group: "billing", Key: "order-1004"}}}
	res := guard.Do(context.Background(), msg, func(ctx context.Context, i int) error {
		return nil // apply the effects of message i here
	})
	fmt.Println(res[0].Outcome, res[0].Err)
}
