package natsjs_test

import (
	"context"
	"log"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/natsjs"
)

// A producer whose messages carry a key stamped once, which is also
// their message id. (Compiled, not run: it needs a nats-server.)
func ExampleNewProducer() {
	ctx := context.Background()
	nc, err := nats.Connect("nats://127.0.0.1:4222")
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Drain()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	gen, err := idgen.New(1, idgen.Config{}) // a node id of this process's own
	if err != nil {
		log.Fatal(err)
	}
	p, err := natsjs.NewProducer(js, msgkey.FromIDs(gen))
	if err != nil {
		log.Fatal(err)
	}
	msg := nats.NewMsg("orders.created")
	msg.Data = []byte(`{"order":42}`)
	ack, err := p.Publish(ctx, msg)
	if err != nil {
		// Publishing msg again sends the same key: the stream drops the
		// copy within its duplicate window, the consumer's store after.
		log.Fatal(err)
	}
	log.Printf("stored at %d, key %s", ack.Sequence, msg.Header.Get(msgkey.Property))
}
