// Command sender produces N distinct records to Kafka through the idemq
// producer, then produces M of them again on purpose, as a client does
// after a timeout it cannot tell from a failure. Every record keeps the key
// it was stamped with, so a receiver using idemq applies each one once.
//
//	sender -brokers 127.0.0.1:9092 -node 1 -topic orders -n 200 -resend 50
//
// Every sending process needs a node id of its own (-node or IDEMQ_NODE),
// or two senders stamp different records with the same key. It prints one
// line: sent=N resent=M.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/kafka"
	"github.com/idemq/idemq/msgkey"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("sender: ")
	brokers := flag.String("brokers", os.Getenv("IDEMQ_KAFKA_BROKERS"), "Kafka bootstrap host:port list, comma-separated (default $IDEMQ_KAFKA_BROKERS)")
	node := flag.String("node", os.Getenv("IDEMQ_NODE"), "this sender's node id 0-1023, used by no other sender (default $IDEMQ_NODE)")
	topic := flag.String("topic", "idemq-demo", "topic to produce to")
	n := flag.Int("n", 200, "distinct records to produce")
	resend := flag.Int("resend", 50, "records to produce a second time")
	flag.Parse()
	switch {
	case flag.NArg() > 0:
		log.Fatalf("unexpected arguments %q: this command takes flags only (see -h)", flag.Args())
	case *brokers == "":
		log.Fatal("no brokers: set -brokers or IDEMQ_KAFKA_BROKERS")
	case *node == "":
		log.Fatal("no node id: set -node or IDEMQ_NODE to a node id no other sender uses")
	case *resend > *n:
		log.Fatalf("cannot resend %d of %d records", *resend, *n)
	}
	id, err := strconv.ParseInt(*node, 10, 64)
	if err != nil {
		log.Fatalf("-node %q: not an integer", *node)
	}
	gen, err := idgen.New(id, idgen.Config{})
	if err != nil {
		log.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		// franz-go asks for a missing topic to be created only when told,
		// whatever the broker's auto.create.topics.enable says.
		kgo.AllowAutoTopicCreation(),
		kgo.WithLogger(kafka.NewLogger(slog.Default())))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	p, err := kafka.NewProducer(cl, msgkey.FromIDs(gen))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	rs := make([]*kgo.Record, *n)
	for i := range rs {
		// The order number partitions the record; the idemq key is stamped
		// into a header.
		rs[i] = &kgo.Record{Topic: *topic, Key: []byte(strconv.Itoa(i)), Value: fmt.Appendf(nil, `{"order":%d,"amount":%d}`, i, 100+i)}
	}
	if _, err := p.ProduceSync(ctx, rs...); err != nil {
		log.Fatal(err)
	}
	// The same records go out again: their keys stay.
	for i := 0; i < *resend; i++ {
		if _, err := p.ProduceSync(ctx, rs[i*len(rs) / *resend]); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("sent=%d resent=%d\n", *n, *resend)
}
