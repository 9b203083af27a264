package redisdedupe_test

import (
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe/redisdedupe"
)

// A client for the dedupe store that fails fast while Redis is down: the
// consumer waits in process for Redis to answer again, asking it with one
// probe at a time, so the client's own retries only delay the failure of
// the calls under way when Redis goes down, and the probe's news that it
// is back.
func ExampleNew_failFast() {
	client := redis.NewClient(&redis.Options{
		Addr:          "localhost:6379",
		DialTimeout:   time.Second, // per dial; default 5s
		DialerRetries: 1,           // dials per attempt; default 5, 100 ms apart
		MaxRetries:    1,           // one retry for a connection lost mid-call; default 3
	})
	defer client.Close()
	store, err := redisdedupe.New(client, redisdedupe.Config{})
	if err != nil {
		log.Fatal(err)
	}
	c, err := consumer.New(store, "order-service")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("outages so far:", c.Stats().Outages)
}
