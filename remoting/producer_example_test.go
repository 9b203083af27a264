package remoting_test

import (
	"context"
	"fmt"
	"log"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	rmqproducer "github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/redisidgen"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/remoting"
)

func ExampleProducer_Stamp() {
	rp, _ := rocketmq.NewProducer(rmqproducer.WithNameServer([]string{"127.0.0.1:9876"}))
	gen, _ := idgen.New(7, idgen.Config{})
	p, _ := remoting.NewProducer(rp, msgkey.FromIDs(gen))

	m := primitive.NewMessage("orders", []byte(`{"order":42}`))
	_ = p.Stamp(context.Background(), m) // SendSync stamps too
	key := msgkey.Of(m)
	_ = p.Stamp(context.Background(), m) // a resend keeps the key

	parts := gen.Config().Layout.Decode(mustParse(key))
	fmt.Println(msgkey.Of(m) == key, m.GetKeys() == key, parts.Node)
	// Output: true true 7
}

func mustParse(s string) idgen.ID {
	id, err := idgen.Parse(s)
	if err != nil {
		panic(err)
	}
	return id
}

// A sender that stamps every message with a key from a generator whose node
// is leased from Redis. (Compiled, not run: it needs a name server and
// Redis.)
func ExampleNewProducer() {
	ctx := context.Background()
	// Each sending process stamps keys on a node id no other holds, leased
	// from a pool in Redis while it runs. A pool Redis has no record of
	// grants its first node after one lease (10s) unless created once with
	// `idemq workers create --pool senders`; a full pool is waited for.
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer client.Close()
	lease, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	gen, err := redisidgen.Lease(lease, client, "senders")
	if err != nil {
		log.Fatal(err)
	}
	defer gen.Close() // releases the node

	rp, err := rocketmq.NewProducer(rmqproducer.WithNsResolver(primitive.NewPassthroughResolver([]string{"127.0.0.1:9876"})))
	if err != nil {
		log.Fatal(err)
	}
	if err := rp.Start(); err != nil {
		log.Fatal(err)
	}
	defer rp.Shutdown()
	sender, err := remoting.NewProducer(rp, msgkey.FromIDs(gen))
	if err != nil {
		log.Fatal(err)
	}
	msg := primitive.NewMessage("orders", []byte(`{"order":42,"amount":1999}`))
	// The key is stamped once, before the first attempt; the client's
	// retries and a resend of msg keep it.
	if _, err := sender.SendSync(ctx, msg); err != nil {
		log.Fatal(err)
	}
	log.Printf("sent order 42 with key %s", msgkey.Of(msg))
}
