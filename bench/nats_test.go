package bench

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmjs "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/jetstream"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/natsjs"
)

// natsWorkers is the naive consumer's goroutines: as many as the adapter's
// Receiver runs by default.
const natsWorkers = 20

// BenchmarkNATSEndToEnd measures what dedupe costs a real NATS JetStream
// consumer (internal/testenv: nats-server with JetStream, nats.go's
// jetstream package): each variant consumes the whole stream through a
// new durable pull consumer (explicit acks, from the first message),
// timed from its first handled message to its e2eMessages-th, the
// variants taking turns, medians of e2eRounds rounds:
//
//   - idemq: the adapter (package natsjs's Receiver, 20 goroutines) with
//     consumer.New over redisdedupe, default options, a handler that does
//     nothing;
//   - dedupe-off: nats.go's Consume at its defaults (one callback at a
//     time, pulls of 500) acknowledging each message (Ack);
//   - naive: Consume handing messages to 20 goroutines that each run SET
//     NX, handler, SET per message on the same Redis, then Ack;
//   - watermill-dedup (default settings only): watermill's router with its
//     in-memory Deduplicator middleware (keyed by the idemq key header)
//     through watermill-nats's jetstream subscriber at its defaults (one
//     message at a time, each acknowledged with DoubleAck) but for its
//     logger, which would print every message.
//
// The rows at batch 32 give the adapter up to 32 messages per store round
// trip; the others have no such setting and run as at the defaults. CPU
// per message is given for this process, nats-server and Redis, from the
// consumer's start.
func BenchmarkNATSEndToEnd(b *testing.B) {
	addr := testenv.NATS(b)
	redisAddr := testenv.Redis(b)
	run := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	topic := "bench-e2e-" + run
	nc, js := natsConnect(b, addr)
	stream := natsStream(b, js, topic)
	natsFill(b, js, topic, run, e2eMessages)
	u, err := url.Parse(addr)
	if err != nil {
		b.Fatal(err)
	}

	// An untimed run first: nats-server's and this process's first
	// consumption allocates what later ones reuse.
	if _, err := consumeAll(b.Context(), natsPlain(stream), "bench-warm-"+run, e2eMessages, nil); err != nil {
		b.Fatal(err)
	}
	for _, batch := range []int{1, e2eBatch} {
		name := "Redis"
		if batch > 1 {
			name = fmt.Sprintf("Redis-batch%d", batch)
		}
		b.Run(name+"/idemq", func(b *testing.B) {
			store, rdb := newRedisStore(b, "bench-nats:"+run+":")
			variants := []e2eVariant{
				{"idemq", func(ctx context.Context, group string, m *meter) (func(), error) {
					c, err := consumer.New(store, group)
					if err != nil {
						return nil, err
					}
					jc, remove, err := natsConsumer(ctx, stream, group)
					if err != nil {
						return nil, err
					}
					r, err := natsjs.Pull(c, jc, func(context.Context, *consumer.Message) error {
						m.Seen(1)
						return nil
					}, natsjs.PullConfig{BatchSize: batch})
					if err != nil {
						remove()
						return nil, err
					}
					ran := make(chan error, 1)
					go func() { ran <- r.Run(context.WithoutCancel(ctx)) }()
					return func() {
						if err := r.Close(); err != nil {
							b.Errorf("natsjs Receiver: %v", err)
						}
						<-ran
						remove()
					}, nil
				}},
				natsPlain(stream),
				natsNaive(stream, rdb),
			}
			if batch == 1 {
				variants = append(variants, natsWatermill(nc, topic))
			}
			e2eRun(b, u.Host, redisAddr, variants)
		})
	}
}

// natsConnect returns a connection to the server at addr and its
// JetStream, closed when tb ends.
func natsConnect(tb testing.TB, addr string) (*nats.Conn, jetstream.JetStream) {
	tb.Helper()
	nc, err := nats.Connect(addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	return nc, js
}

// natsStream creates the stream topic of the subject topic (as
// watermill-nats names them), deleted when tb ends.
func natsStream(tb testing.TB, js jetstream.JetStream, topic string) jetstream.Stream {
	tb.Helper()
	s, err := js.CreateStream(tb.Context(), jetstream.StreamConfig{Name: topic, Subjects: []string{topic}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = js.DeleteStream(ctx, topic)
	})
	return s
}

// natsFill publishes n messages of e2eBody to subject, their idemq keys
// run-0, run-1, … in the msgkey.Property header and as their Nats-Msg-Id,
// as the adapter's Producer stamps them.
func natsFill(tb testing.TB, js jetstream.JetStream, subject, run string, n int) {
	tb.Helper()
	for i := range n {
		key := fmt.Sprintf("%s-%d", run, i)
		m := &nats.Msg{Subject: subject, Data: e2eBody, Header: nats.Header{msgkey.Property: {key}}}
		if _, err := js.PublishMsgAsync(m, jetstream.WithMsgID(key)); err != nil {
			tb.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		tb.Fatalf("%d publishes pending after a minute", js.PublishAsyncPending())
	}
}

// natsConsumer creates a durable pull consumer named group of stream,
// explicit acks, from the first message; stop deletes it.
func natsConsumer(ctx context.Context, stream jetstream.Stream, group string) (jetstream.Consumer, func(), error) {
	c, err := stream.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: group, AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		return nil, nil, err
	}
	return c, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = stream.DeleteConsumer(ctx, group)
	}, nil
}

// natsPlain is dedupe-off: nats.go's Consume at its defaults, acknowledging
// each message.
func natsPlain(stream jetstream.Stream) e2eVariant {
	return e2eVariant{"dedupe-off", func(ctx context.Context, group string, m *meter) (func(), error) {
		c, remove, err := natsConsumer(ctx, stream, group)
		if err != nil {
			return nil, err
		}
		cc, err := c.Consume(func(msg jetstream.Msg) {
			if msg.Ack() == nil {
				m.Seen(1)
			}
		})
		if err != nil {
			remove()
			return nil, err
		}
		return func() {
			cc.Stop()
			<-cc.Closed()
			remove()
		}, nil
	}}
}

// natsNaive is naive: Consume hands each message to one of natsWorkers
// goroutines, which runs SET NX, handler, SET and acknowledges it.
func natsNaive(stream jetstream.Stream, rdb *redis.Client) e2eVariant {
	return e2eVariant{"naive", func(ctx context.Context, group string, m *meter) (func(), error) {
		c, remove, err := natsConsumer(ctx, stream, group)
		if err != nil {
			return nil, err
		}
		ch := make(chan jetstream.Msg)
		var wg sync.WaitGroup
		for range natsWorkers {
			wg.Go(func() {
				for msg := range ch {
					if naiveOnce(ctx, rdb, group, msg.Headers().Get(msgkey.Property)) != nil {
						continue // not acknowledged: the bench times out
					}
					if msg.Ack() == nil {
						m.Seen(1)
					}
				}
			})
		}
		cc, err := c.Consume(func(msg jetstream.Msg) { ch <- msg })
		if err != nil {
			close(ch)
			remove()
			return nil, err
		}
		return func() {
			cc.Stop()
			<-cc.Closed()
			close(ch)
			wg.Wait()
			remove()
		}, nil
	}}
}

// natsWatermill is watermill-dedup on NATS: watermill-nats's jetstream
// subscriber (an ephemeral consumer of its own per run, from the first
// message) on a connection of its own, which its Close drains.
func natsWatermill(nc *nats.Conn, topic string) e2eVariant {
	return e2eVariant{"watermill-dedup", func(ctx context.Context, _ string, m *meter) (func(), error) {
		own, err := nats.Connect(nc.ConnectedUrl())
		if err != nil {
			return nil, err
		}
		sub, err := wmjs.NewSubscriber(wmjs.SubscriberConfig{Conn: own, Logger: watermill.NopLogger{}})
		if err != nil {
			own.Close()
			return nil, err
		}
		return watermillRun(ctx, sub, topic, func(*message.Message) error {
			m.Seen(1)
			return nil
		})
	}}
}
