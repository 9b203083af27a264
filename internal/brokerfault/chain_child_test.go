package brokerfault

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/relaychild"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testenv/remotingread"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/outbox"
	"github.com/idemq/idemq/remoting"
)

// roleChain is a service of the chain in a process of its own: it consumes
// Topic in the transactional mode (consumer.Consumer.Tx over a sqldedupe
// store in its database), writes a row per message into its effects
// table, and, when EmitTo is set, emits a message per message with
// Outbox.Emit in the same transaction (service B); else the row is all it
// does (service C).
//
// It says "ready" once it consumes, and "copy KEY BODY BROKER OFFSETMSGID
// STORED DELIVERED" (times in Unix milliseconds) for every copy the broker
// delivers, before the consumer sees it, so that the parent counts what
// the broker delivered, duplicates included. Its effects rows name it
// (Instance) as their applier. Asked to stop, it drains and says "stats …"
// (consumer.Stats); a drain that runs out of its bound fails the process.
const roleChain = "chain-service"

// roles are the children's roles, for racechild.Main.
var roles = map[string]func() error{
	roleChain:       chainService,
	relaychild.Role: relaychild.Run,
}

// chainSettings is what a chain service process is started with.
type chainSettings struct {
	Namesrv, DSN           string
	Topic, Group, Instance string
	// EmitTo is the topic B emits a payment to for each order; "" for C.
	EmitTo string
	// HoldAt makes the HoldAt-th handler run (0: none) say "holding KEY"
	// once it has written its row and emitted, and wait, its transaction
	// open, until the process is killed or stopped.
	HoldAt int64
}

// emitName is the name B's handler gives the one message it emits per
// order (msgkey.Derive).
const emitName = "payment"

// drainBound bounds a chain service's drain.
const drainBound = 10 * time.Second

// paymentBody is the body of the payment B emits for the order body: the
// order's number under another name, so that C's copies say which order
// they pay.
func paymentBody(order []byte) []byte {
	return []byte("payment-" + strings.TrimPrefix(string(order), "order-"))
}

func chainService() error {
	var s chainSettings
	if err := racechild.Settings(&s); err != nil {
		return err
	}
	db, b, err := testdb.OpenNamed(testdb.MySQL.Name, s.DSN)
	if err != nil {
		return err
	}
	defer db.Close()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	store, err := sqldedupe.New(db, b.Dialect, sqldedupe.Config{Logger: log})
	if err != nil {
		return err
	}
	defer store.Close()
	// Emit derives its keys: the outbox needs no key source.
	o, err := outbox.New(db, b.Dialect, nil, outbox.Config{})
	if err != nil {
		return err
	}
	c, err := consumer.New(store, s.Group, consumer.WithLogger(log), consumer.WithDelayLevels(brokerLevels...))
	if err != nil {
		return err
	}
	var runs atomic.Int64
	h, err := c.Tx(func(ctx context.Context, tx *sql.Tx, m *consumer.Message) error {
		hold := runs.Add(1) == s.HoldAt
		if _, err := tx.ExecContext(ctx, "INSERT INTO effects (k, body, applier) VALUES (?, ?, ?)", msgkey.Of(m), string(m.Body), s.Instance); err != nil {
			return err
		}
		if s.EmitTo != "" {
			if _, err := o.Emit(ctx, emitName, outbox.Message{Topic: s.EmitTo, Body: paymentBody(m.Body)}); err != nil {
				return err
			}
		}
		if hold {
			racechild.Say("holding %s", msgkey.Of(m))
			<-ctx.Done()
			return context.Cause(ctx)
		}
		return nil
	})
	if err != nil {
		return err
	}
	consume := remoting.Concurrently(c, h)
	pc, err := remotingread.PushConsumer(s.Namesrv, s.Group, s.Instance)
	if err != nil {
		return err
	}
	err = pc.Subscribe(s.Topic, rmq.MessageSelector{}, func(ctx context.Context, msgs ...*primitive.MessageExt) (rmq.ConsumeResult, error) {
		for _, m := range msgs {
			key, broker := msgkey.Of(m), "-"
			if key == "" {
				key = "-"
			}
			if m.Queue != nil {
				broker = m.Queue.BrokerName
			}
			racechild.Say("copy %s %s %s %s %d %d", key, m.Body, broker, m.OffsetMsgId, m.StoreTimestamp, time.Now().UnixMilli())
		}
		return consume(ctx, msgs...)
	})
	if err != nil {
		return err
	}
	if err := pc.Start(); err != nil {
		return err
	}
	racechild.Say("ready")
	<-racechild.Stopped()
	ctx, cancel := context.WithTimeout(context.Background(), drainBound)
	defer cancel()
	err = remoting.Drain(ctx, c, pc)
	st := c.Stats()
	racechild.Say("stats delivered=%d completed=%d suppressed=%d failed=%d busy=%d leaselost=%d unrecorded=%d",
		st.Delivered, st.Completed, st.Suppressed, st.Failed, st.Busy, st.LeaseLost, st.Unrecorded)
	if err != nil {
		return fmt.Errorf("drain of %s: %w", s.Instance, err)
	}
	return nil
}
