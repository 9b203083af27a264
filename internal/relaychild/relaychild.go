// Package relaychild runs an outbox relay into a real broker as a child
// process of a test binary (internal/racechild), so that a test can kill it
// with SIGKILL, stop it and replace it, and starts the remoting sender such
// relays ship with. Tests of package remoting and internal/brokerfault share
// it.
//
// A test package's TestMain passes [Role] and [Run] to racechild.Main; a
// test starts a relay with racechild.Start(t, relaychild.Role, name,
// relaychild.Settings{…}). The relay says "started" once it runs, "midway"
// after [Settings.Midway] sends (where it may hold, [Settings.Hold]), and, asked to stop, closes the relay and
// says "stats SHIPPED LEASELOST" (outbox.Stats).
//
// The package is test support: import it from _test.go files only.
package relaychild

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	rmqproducer "github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/outbox"
	"github.com/idemq/idemq/remoting"
)

// Role is the relay's role name, for racechild.Main and racechild.Start.
const Role = "relay"

// Settings are a relay process's settings.
type Settings struct {
	Namesrv string
	// Backend names the database's testdb backend (testdb.OpenNamed), and
	// DSN is the database whose outbox table (outbox.DefaultTable) the
	// relay ships.
	Backend, DSN string
	// Name is the producer's group and instance name.
	Name  string
	Lease time.Duration
	// Pause is slept before each send, to stretch a claim's sending.
	Pause time.Duration
	// Midway is after how many sends the relay says "midway" (0: never).
	Midway int64
	// Hold makes the send that says "midway" return only once the relay is
	// asked to stop: its row stays stored on the broker and unmarked, as
	// when a relay dies between the two, for a test to kill it there.
	Hold bool
	// SendTimeout bounds each send; default [StartSender]'s minute. A
	// send already written to a broker that dies waits for it.
	SendTimeout time.Duration
}

// slowSender pauses before each send and says "midway" after midway sends,
// holding that send with hold.
type slowSender struct {
	outbox.Sender
	pause  time.Duration
	midway int64
	hold   bool
	sends  atomic.Int64
}

func (s *slowSender) Send(ctx context.Context, m *outbox.Message) error {
	time.Sleep(s.pause)
	err := s.Sender.Send(ctx, m)
	if err == nil && s.sends.Add(1) == s.midway {
		racechild.Say("midway")
		if s.hold {
			<-racechild.Stopped()
		}
	}
	return err
}

// Run is the relay process's life, the role racechild.Main runs.
func Run() error {
	var s Settings
	if err := racechild.Settings(&s); err != nil {
		return err
	}
	db, b, err := testdb.OpenNamed(s.Backend, s.DSN)
	if err != nil {
		return err
	}
	defer db.Close()
	// The relay adds no rows: it needs no key source.
	o, err := outbox.New(db, b.Dialect, nil, outbox.Config{})
	if err != nil {
		return err
	}
	var opts []rmqproducer.Option
	if s.SendTimeout > 0 {
		opts = append(opts, rmqproducer.WithSendMsgTimeout(s.SendTimeout))
	}
	sender, stop, err := StartSender(s.Namesrv, s.Name, opts...)
	if err != nil {
		return err
	}
	defer stop()
	r, err := outbox.NewRelay(o, &slowSender{Sender: sender, pause: s.Pause, midway: s.Midway, hold: s.Hold},
		outbox.RelayConfig{Batch: 20, Concurrency: 2, Lease: s.Lease, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	racechild.Say("started")
	<-racechild.Stopped()
	r.Close()
	st := r.Stats()
	racechild.Say("stats %d %d", st.Shipped, st.LeaseLost)
	return nil
}

// StartSender starts a producer named name (its group and instance) on the
// name server ns, whose queue follows the sharding key, and returns an
// OutboxSender over it and the function that shuts the producer down. opts
// come after its own.
func StartSender(ns, name string, opts ...rmqproducer.Option) (*remoting.OutboxSender, func(), error) {
	rp, err := rocketmq.NewProducer(append([]rmqproducer.Option{
		rmqproducer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns})),
		rmqproducer.WithGroupName(name),
		rmqproducer.WithInstanceName(name),
		rmqproducer.WithQueueSelector(rmqproducer.NewHashQueueSelector()),
		rmqproducer.WithRetry(1),
		// TestRelaysShipInOrder's poison row (package remoting) is 4 MiB of
		// random bytes: on a loaded machine its upload outlasted the
		// client's 3 s default, whose timeout (retried, and cutting the
		// connection other keys' sends shared) then stood where the
		// broker's refusal should be.
		rmqproducer.WithSendMsgTimeout(time.Minute),
	}, opts...)...)
	if err != nil {
		return nil, nil, err
	}
	if err := rp.Start(); err != nil {
		return nil, nil, err
	}
	stop := func() { rp.Shutdown() }
	s, err := remoting.NewOutboxSender(rp)
	if err != nil {
		stop()
		return nil, nil, err
	}
	return s, stop, nil
}
