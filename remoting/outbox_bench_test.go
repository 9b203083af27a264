package remoting_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemq/idemq/internal/relaychild"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/outbox"
	"github.com/idemq/idemq/outbox/pgwake"
)

// BenchmarkShip ships b.N messages of 200 bytes to the real 4.x broker:
// through a relay from rows waiting in a MariaDB or PostgreSQL table
// (idemq-relay-*, sending batches; idemq-relay-single-*, through a Sender
// that hides SendBatch, one send a row), against plain loops that send the
// same messages from as many goroutines as the relay's Concurrency, with no
// table in between: one message a send (plain), or batches of the relay's
// largest (plain-batch). Reported per message.
func BenchmarkShip(b *testing.B) {
	const concurrency, batch = 16, 64
	ns := testenv.RocketMQ(b)
	topic := fmt.Sprintf("outbox-bench-%d-%d", os.Getpid(), time.Now().UnixNano())
	if err := testenv.CreateRocketMQTopic(context.Background(), ns, topic, 4); err != nil {
		b.Fatal(err)
	}
	body := []byte(strings.Repeat("x", 200))
	for _, size := range []int{1, batch} {
		name := "plain"
		if size > 1 {
			name = "plain-batch"
		}
		b.Run(name, func(b *testing.B) {
			s, stop, err := relaychild.StartSender(ns, topic+"-"+name)
			if err != nil {
				b.Fatal(err)
			}
			defer stop()
			var wg sync.WaitGroup
			next := make(chan int) // how many messages the next send takes
			b.ResetTimer()
			for range concurrency {
				wg.Go(func() {
					for n := range next {
						msgs := make([]*outbox.Message, n)
						for i := range msgs {
							msgs[i] = &outbox.Message{Topic: topic, Body: body, Properties: map[string]string{}}
						}
						var err error
						if n == 1 {
							err = s.Send(context.Background(), msgs[0])
						} else {
							err = s.SendBatch(context.Background(), msgs)
						}
						if err != nil {
							b.Error(err)
						}
					}
				})
			}
			for left := b.N; left > 0; left -= size {
				next <- min(left, size)
			}
			close(next)
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
	for _, single := range []bool{false, true} {
		for _, be := range []testdb.Backend{testdb.MySQL, testdb.Postgres} {
			name := "idemq-relay-" + be.Name
			if single {
				name = "idemq-relay-single-" + be.Name
			}
			b.Run(name, func(b *testing.B) {
				db := be.Open(b)
				o := migrated(b, db, be.Dialect, 21)
				ctx := context.Background()
				msgs := make([]outbox.Message, 256)
				for i := range msgs {
					msgs[i] = outbox.Message{Topic: topic, Body: body}
				}
				for left := b.N; left > 0; left -= len(msgs) {
					tx, err := db.BeginTx(ctx, nil)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := o.AddBatch(ctx, tx, msgs[:min(left, len(msgs))]); err != nil {
						b.Fatal(err)
					}
					if err := tx.Commit(); err != nil {
						b.Fatal(err)
					}
				}
				s, stop, err := relaychild.StartSender(ns, topic+"-"+name)
				if err != nil {
					b.Fatal(err)
				}
				defer stop()
				var sender outbox.Sender = s
				if single {
					sender = struct{ outbox.Sender }{s} // SendBatch hidden
				}
				b.ResetTimer()
				r, err := outbox.NewRelay(o, sender, outbox.RelayConfig{Batch: 1024, Concurrency: concurrency, Delete: true, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					b.Fatal(err)
				}
				for r.Stats().Shipped < int64(b.N) {
					time.Sleep(time.Millisecond)
				}
				b.StopTimer()
				r.Close()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			})
		}
	}
}

// timing is a BatchSender that records, after each send, how long ago each
// of its messages' rows was added: the time is the body's first field.
type timing struct {
	outbox.BatchSender
	mu   sync.Mutex
	lags []time.Duration
}

func (s *timing) Send(ctx context.Context, m *outbox.Message) error {
	err := s.BatchSender.Send(ctx, m)
	if err == nil {
		s.record(m)
	}
	return err
}

func (s *timing) SendBatch(ctx context.Context, msgs []*outbox.Message) error {
	err := s.BatchSender.SendBatch(ctx, msgs)
	if err == nil {
		s.record(msgs...)
	}
	return err
}

func (s *timing) record(msgs ...*outbox.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		var ns int64
		fmt.Sscan(string(m.Body), &ns)
		s.lags = append(s.lags, time.Since(time.Unix(0, ns)))
	}
}

// BenchmarkCommitToBroker commits one row of 200 bytes a millisecond (1k
// msgs/s) into a MariaDB or PostgreSQL outbox while a relay ships them to
// the real 4.x broker, and reports the time from each row's transaction
// (just before its INSERT and COMMIT) to the broker's answer to its send:
// p50 and p99, in ms. The relay polls every 20 ms, or, in
// idemq-postgres-notify, is woken by package pgwake and polls every second.
func BenchmarkCommitToBroker(b *testing.B) {
	ns := testenv.RocketMQ(b)
	topic := fmt.Sprintf("outbox-lag-%d-%d", os.Getpid(), time.Now().UnixNano())
	if err := testenv.CreateRocketMQTopic(context.Background(), ns, topic, 4); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		be     testdb.Backend
		notify bool
	}{{testdb.MySQL, false}, {testdb.Postgres, false}, {testdb.Postgres, true}} {
		be, name := c.be, "idemq-"+c.be.Name
		if c.notify {
			name += "-notify"
		}
		b.Run(name, func(b *testing.B) {
			dsn := be.DSN(b)
			db := be.OpenDSN(b, dsn)
			o := migrated(b, db, be.Dialect, 23)
			ctx := context.Background()
			s, stop, err := relaychild.StartSender(ns, topic+"-"+be.Name)
			if err != nil {
				b.Fatal(err)
			}
			defer stop()
			ts := &timing{BatchSender: s}
			cfg := outbox.RelayConfig{Delete: true, Logger: slog.New(slog.DiscardHandler)}
			if c.notify {
				if err := pgwake.Install(ctx, db, outbox.DefaultTable); err != nil {
					b.Fatal(err)
				}
				l, err := pgwake.Listen(ctx, dsn, outbox.DefaultTable)
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				cfg.Wake, cfg.PollInterval = l.C, time.Second
			}
			r, err := outbox.NewRelay(o, ts, cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			b.ResetTimer()
			for range b.N {
				<-tick.C
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				body := fmt.Appendf(nil, "%d ", time.Now().UnixNano())
				body = append(body, strings.Repeat("x", 200-len(body))...)
				if _, err := o.Add(ctx, tx, outbox.Message{Topic: topic, Body: body}); err != nil {
					b.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			for r.Stats().Shipped < int64(b.N) {
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			ts.mu.Lock()
			lags := slices.Clone(ts.lags)
			ts.mu.Unlock()
			slices.Sort(lags)
			b.ReportMetric(float64(lags[len(lags)/2])/1e6, "p50-ms")
			b.ReportMetric(float64(lags[len(lags)*99/100])/1e6, "p99-ms")
		})
	}
}
