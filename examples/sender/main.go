// Command sender sends N distinct messages to RocketMQ through the idemq
// producer, then sends M of them again on purpose, as a client does after a
// timeout it cannot tell from a failure. Every message keeps the key it was
// stamped with, so a receiver using idemq applies each one once.
//
//	sender -namesrv 127.0.0.1:9876 -redis 127.0.0.1:6379 -topic orders -n 200 -resend 50
//
// Every sending process needs a node id of its own, or two senders stamp
// different messages with the same key and consumers drop one of them as a
// duplicate. By default the sender leases one from a pool in Redis (-redis,
// the same Redis as the dedupe store will do) for as long as it runs; -node
// (or IDEMQ_NODE) sets one by hand instead, registered in the pool when
// -redis is given too, so that a second sender with the same node fails at
// start. With neither it refuses to start.
//
// It prints one line: sent=N resent=M.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"strconv"
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

func main() {
	log.SetFlags(0)
	log.SetPrefix("sender: ")
	namesrv := flag.String("namesrv", os.Getenv("IDEMQ_ROCKETMQ_NAMESRV"), "RocketMQ name server host:port (default $IDEMQ_ROCKETMQ_NAMESRV)")
	topic := flag.String("topic", "idemq-demo", "topic to send to")
	n := flag.Int("n", 200, "distinct messages to send")
	resend := flag.Int("resend", 50, "messages to send a second time")
	pause := flag.Duration("resend-after", time.Second, "pause before re-sending, as a client that timed out would")
	redisAddr := flag.String("redis", os.Getenv("IDEMQ_REDIS_ADDR"), "Redis host:port to lease the node id from (default $IDEMQ_REDIS_ADDR)")
	pool := flag.String("pool", "idemq-senders", "the node id pool in Redis shared by every sender")
	lease := flag.Duration("lease", 10*time.Second, "node id lease; every sender of one pool must use the same")
	nodeFlag := flag.String("node", os.Getenv("IDEMQ_NODE"), "a static node id 0-1023 instead of a leased one (default $IDEMQ_NODE)")
	flag.Parse()
	if flag.NArg() > 0 {
		// A stray word (a flag's value after a space, a mistyped flag
		// without its dash) would otherwise be ignored silently.
		log.Fatalf("unexpected arguments %q: this command takes flags only (see -h)", flag.Args())
	}
	if *namesrv == "" {
		log.Fatal("no name server: set -namesrv or IDEMQ_ROCKETMQ_NAMESRV")
	}
	if *resend > *n {
		log.Fatalf("cannot resend %d of %d messages", *resend, *n)
	}
	if c, err := net.DialTimeout("tcp", *namesrv, 3*time.Second); err != nil {
		// Reported as such, not as the client's later "route info not found".
		log.Fatalf("name server %s (-namesrv): %v", *namesrv, err)
	} else {
		c.Close()
	}

	ctx := context.Background()
	gen, err := newGenerator(ctx, *redisAddr, *pool, *lease, *nodeFlag)
	if err != nil {
		log.Fatal(err)
	}
	defer gen.Close()
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
	p, err := remoting.NewProducer(rp, msgkey.FromIDs(gen))
	if err != nil {
		log.Fatal(err)
	}

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

// newGenerator returns the ID generator of this process: on a node leased
// from the pool in Redis, or on the static node, registered in the pool when
// there is one. It never picks a node by itself.
func newGenerator(ctx context.Context, redisAddr, pool string, lease time.Duration, node string) (*idgen.Generator, error) {
	cfg := idgen.Config{
		// Waits out a clock that runs behind the node's last holder.
		Rollback: idgen.Wait{Max: time.Second},
	}
	var id int64
	if node != "" {
		var err error
		if id, err = strconv.ParseInt(node, 10, 64); err != nil {
			return nil, fmt.Errorf("-node %q: not an integer", node)
		}
	}
	if redisAddr == "" {
		if node == "" {
			return nil, errors.New("no node id: set -redis (or IDEMQ_REDIS_ADDR) to lease one, or -node (or IDEMQ_NODE) to a node id no other sender uses")
		}
		return idgen.New(id, cfg)
	}
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	leaser, err := redisidgen.New(rdb, redisidgen.Config{Pool: pool, Size: idgen.Twitter.MaxNode() + 1, Lease: lease})
	if err != nil {
		return nil, err
	}
	// A static node is registered in the pool. A pool Redis has no record
	// of waits one lease before it grants anything; a full pool waits for
	// a node to come free.
	ctx, cancel := context.WithTimeout(ctx, 2*lease+10*time.Second)
	defer cancel()
	return idgen.NewLeased(ctx, leaser, cfg, idgen.LeaseConfig{Static: node != "", Node: id, Wait: true})
}

// send retries like an application would; the key is kept on every try.
func send(ctx context.Context, p *remoting.Producer, m *primitive.Message) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if _, err = p.SendSync(ctx, m); err == nil {
			return nil
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("send %s: %w", msgkey.Of(m), err)
}
