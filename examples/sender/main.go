// Command sender sends N distinct messages to RocketMQ through the idemq
// producer, then sends M of them again on purpose, as a client does after a
// timeout it cannot tell from a failure. Every message keeps the key it was
// stamped with, so a receiver using idemq applies each one once.
//
//	sender -namesrv 127.0.0.1:9876 -topic orders -n 200 -resend 50
//
// It prints one line: sent=N resent=M.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	rmqproducer "github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/producer"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("sender: ")
	namesrv := flag.String("namesrv", os.Getenv("IDEMQ_ROCKETMQ_NAMESRV"), "RocketMQ name server host:port (default $IDEMQ_ROCKETMQ_NAMESRV)")
	topic := flag.String("topic", "idemq-demo", "topic to send to")
	n := flag.Int("n", 200, "distinct messages to send")
	resend := flag.Int("resend", 50, "messages to send a second time")
	pause := flag.Duration("resend-after", time.Second, "pause before re-sending, as a client that timed out would")
	flag.Parse()
	if *namesrv == "" {
		log.Fatal("no name server: set -namesrv or IDEMQ_ROCKETMQ_NAMESRV")
	}
	if *resend > *n {
		log.Fatalf("cannot resend %d of %d messages", *resend, *n)
	}
	rlog.SetLogLevel("error")

	// One node id per sending process; IDEMQ_NODE overrides the default.
	node, err := idgen.NodeFromEnv(idgen.Twitter, "IDEMQ_NODE")
	switch {
	case errors.Is(err, idgen.ErrNoNode):
		node = 1
	case err != nil:
		log.Fatal(err)
	}
	gen, err := idgen.New(idgen.Config{Node: node})
	if err != nil {
		log.Fatal(err)
	}
	rp, err := rocketmq.NewProducer(
		rmqproducer.WithNsResolver(primitive.NewPassthroughResolver([]string{*namesrv})),
		rmqproducer.WithGroupName("idemq-demo-sender"),
		rmqproducer.WithInstanceName("sender-"+strconv.Itoa(os.Getpid())),
		rmqproducer.WithRetry(2),
	)
	if err != nil {
		log.Fatal(err)
	}
	if err := rp.Start(); err != nil {
		log.Fatal(err)
	}
	defer rp.Shutdown()
	p, err := producer.New(rp, producer.IDKeys(gen))
	if err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	msgs := make([]*primitive.Message, *n)
	for i := range msgs {
		msgs[i] = primitive.NewMessage(*topic, fmt.Appendf(nil, `{"order":%d,"amount":%d}`, i, 100+i))
		if err := send(ctx, p, msgs[i]); err != nil {
			log.Fatal(err)
		}
	}
	// The same *primitive.Message values go out again: their keys stay.
	time.Sleep(*pause)
	for i := 0; i < *resend; i++ {
		if err := send(ctx, p, msgs[i*len(msgs) / *resend]); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("sent=%d resent=%d\n", *n, *resend)
}

// send retries like an application would; the key is kept on every try.
func send(ctx context.Context, p *producer.Producer, m *primitive.Message) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if _, err = p.SendSync(ctx, m); err == nil {
			return nil
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("send %s: %w", producer.Key(m), err)
}
