// Command sender publishes N distinct messages to a JetStream stream
// through the idemq producer, then publishes M of them again, as a client
// does after a timeout it cannot tell from a failure. Each keeps the key
// it was stamped with, which is also its message id: the stream drops
// the copies within its duplicate window, and a receiver using idemq
// suppresses any that come later.
//
//	sender -nats nats://127.0.0.1:4222 -node 1 -n 200 -resend 50
//
// Every sending process needs a node id 0-1023 of its own (-node), or two
// senders stamp different messages with the same key.
//
// It prints one line: sent=N resent=M dropped=D (D: copies the stream
// dropped as duplicates).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/natsjs"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("sender: ")
	url := flag.String("nats", os.Getenv("IDEMQ_NATS_URL"), "nats-server URL (default $IDEMQ_NATS_URL)")
	node := flag.Int64("node", -1, "this sender's node id, 0-1023, unique among senders")
	stream := flag.String("stream", "IDEMQ_DEMO", "stream, created if missing")
	subject := flag.String("subject", "idemq.demo", "subject to publish to")
	n := flag.Int("n", 200, "distinct messages to send")
	resend := flag.Int("resend", 50, "messages to send a second time")
	flag.Parse()
	switch {
	case *url == "":
		log.Fatal("no server: set -nats or IDEMQ_NATS_URL")
	case *node < 0:
		log.Fatal("no node id: set -node to one of this sender's own")
	case *resend > *n:
		log.Fatalf("cannot resend %d of %d messages", *resend, *n)
	}
	ctx := context.Background()
	gen, err := idgen.New(*node, idgen.Config{})
	if err != nil {
		log.Fatal(err)
	}
	nc, err := nats.Connect(*url)
	if err != nil {
		log.Fatalf("nats-server %s (-nats): %v", *url, err)
	}
	defer nc.Drain()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: *stream, Subjects: []string{*subject}}); err != nil {
		log.Fatal(err)
	}
	p, err := natsjs.NewProducer(js, msgkey.FromIDs(gen))
	if err != nil {
		log.Fatal(err)
	}
	msgs := make([]*nats.Msg, *n)
	for i := range msgs {
		msgs[i] = nats.NewMsg(*subject)
		msgs[i].Data = fmt.Appendf(nil, `{"Order":%d,"Amount":%d}`, i, 100+i)
		if _, err := p.Publish(ctx, msgs[i]); err != nil {
			log.Fatal(err)
		}
	}
	dropped := 0
	for _, m := range msgs[:*resend] {
		ack, err := p.Publish(ctx, m) // the same key, and message id
		if err != nil {
			log.Fatal(err)
		}
		if ack.Duplicate {
			dropped++
		}
	}
	fmt.Println("sent=" + strconv.Itoa(*n) + " resent=" + strconv.Itoa(*resend) + " dropped=" + strconv.Itoa(dropped))
}
