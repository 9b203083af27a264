package natsjs_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/natsjs"
)

// roleWorker is a consumer process of the fault tests: it runs Pull on a
// durable consumer with a Redis dedupe store, its effect a count per key
// in a Redis hash (workerSettings.Ledger), saying "ready" once it runs,
// until its standard input closes; then it drains and says "stats …".
const roleWorker = "worker"

// workerSettings are a worker's.
type workerSettings struct {
	NATS, Stream, Durable string
	// Store is the dedupe store's Redis, Effects the Redis of the ledger.
	Store, Effects, Ledger string
	// FailEvery, if positive, fails the first run of every key whose
	// number (after its last '-') it divides.
	FailEvery int
	Workers   int
	BatchSize int
	// Hold is how long the handler takes before its effect.
	Hold time.Duration
	// SQLite, if set, is the path of a SQLite database that is both the
	// dedupe store and the effects' (a row per run in table effects), the
	// handler running in the transaction that records its key
	// (consumer.Tx): Store, Effects and Ledger are then unused.
	SQLite string
	// MaxReconsume and Delay are the retry policy: the JetStream
	// consumer's MaxDeliver is MaxReconsume+1.
	MaxReconsume int32
	Delay        time.Duration
}

func worker() error {
	var s workerSettings
	if err := racechild.Settings(&s); err != nil {
		return err
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		<-racechild.Stopped()
		stop()
	}()
	opts := []consumer.Option{consumer.WithMaxReconsumeTimes(s.MaxReconsume), consumer.WithDelayLevels(s.Delay),
		consumer.WithStoreDownWait(100 * time.Millisecond),
		consumer.WithGuard(dedupe.GuardConfig{Lease: 5 * time.Second, Retention: 10 * time.Minute})}
	var (
		c      *consumer.Consumer
		handle consumer.Handler
	)
	if s.SQLite != "" {
		db, err := openSQLite(s.SQLite)
		if err != nil {
			return err
		}
		defer db.Close()
		store, err := sqldedupe.New(db, dialect.SQLite, sqldedupe.Config{})
		if err != nil {
			return err
		}
		defer store.Close()
		if c, err = consumer.New(store, s.Durable, opts...); err != nil {
			return err
		}
		handle, err = c.Tx(func(ctx context.Context, tx *sql.Tx, m *consumer.Message) error {
			time.Sleep(s.Hold)
			_, err := tx.ExecContext(ctx, "INSERT INTO effects (k) VALUES (?)", msgkey.Of(m))
			return err
		})
		if err != nil {
			return err
		}
	} else {
		storeDB := redis.NewClient(&redis.Options{Addr: s.Store, MaxRetries: -1})
		defer storeDB.Close()
		effects := redis.NewClient(&redis.Options{Addr: s.Effects})
		defer effects.Close()
		store, err := redisdedupe.New(storeDB, redisdedupe.Config{})
		if err != nil {
			return err
		}
		if c, err = consumer.New(store, s.Durable, opts...); err != nil {
			return err
		}
		handle = redisEffect(s, effects)
	}
	nc, err := nats.Connect(s.NATS, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	jc, err := js.Consumer(ctx, s.Stream, s.Durable)
	if err != nil {
		return err
	}
	r, err := natsjs.Pull(c, jc, handle, natsjs.PullConfig{Workers: s.Workers, BatchSize: s.BatchSize, PollWait: 500 * time.Millisecond})
	if err != nil {
		return err
	}
	racechild.Say("ready")
	err = r.Run(ctx)
	st := c.Stats()
	racechild.Say("stats %s", fmt.Sprintf("delivered=%d completed=%d suppressed=%d failed=%d waited=%d storewaited=%d retried=%d unrecorded=%d",
		st.Delivered, st.Completed, st.Suppressed, st.Failed, st.Waited, st.StoreWaited, st.Retried, st.Unrecorded))
	return err
}

// redisEffect is the handler whose effect is a count per key in the
// Redis hash s.Ledger, failing as s.FailEvery says.
func redisEffect(s workerSettings, effects *redis.Client) consumer.Handler {
	return func(ctx context.Context, m *consumer.Message) error {
		key := msgkey.Of(m)
		if s.FailEvery > 0 {
			n, err := strconv.Atoi(key[strings.LastIndexByte(key, '-')+1:])
			if err != nil {
				return err
			}
			if n%s.FailEvery == 0 {
				first, err := effects.SetNX(ctx, s.Ledger+":failed:"+key, 1, 0).Result()
				if err != nil {
					return err
				}
				if first {
					return errors.New("worker: failing the first run")
				}
			}
		}
		time.Sleep(s.Hold)
		return effects.HIncrBy(ctx, s.Ledger, key, 1).Err()
	}
}

// openSQLite opens the SQLite database at path, which several processes
// share.
func openSQLite(path string) (*sql.DB, error) {
	return sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
}
