package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	rmqproducer "github.com/apache/rocketmq-client-go/v2/producer"
	golang "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"

	"github.com/idemq/idemq/grpcv5"
	"github.com/idemq/idemq/internal/sqldialect"
	"github.com/idemq/idemq/outbox"
	"github.com/idemq/idemq/outbox/pgwake"
	"github.com/idemq/idemq/remoting"
)

const relayDoc = `Ship the committed rows of a transactional outbox table (package outbox) to
RocketMQ until SIGINT or SIGTERM: through a name server with the remoting
client (--namesrv), or through a 5.x proxy with the gRPC client (--proxy).
Run as many relays over one table as you like: each row is claimed by one at
a time, and rows with the same ordering key ship in order. Every row carries
the key it was stamped with when it was added.

It prints "relaying" once it runs. On SIGINT or SIGTERM it stops claiming,
ships the rows it holds for up to --drain-timeout, prints what it shipped and
exits. Logs go to stderr: warnings and errors only, unless --log-level says
otherwise.`

// relayCmd runs `idemq relay`, which main's run dispatches to, and returns
// the exit status: 0 after a clean shutdown on SIGINT or SIGTERM (the end
// of ctx), 1 when it cannot start, 2 for a usage error.
func relayCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return report(relay(ctx, args, stdout, stderr), stderr)
}

func relay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newOutboxFlags("idemq relay", "--store URL (--namesrv ADDR | --proxy ADDR --topic T...) [flags]", relayDoc)
	f.Lookup("json").Usage = "log JSON lines instead of text"
	f.Lookup("timeout").Usage = "give up starting after `D`: opening the store, starting the client"
	namesrv := f.String("namesrv", "", "RocketMQ name server `address` (host:port), for the remoting client")
	proxy := f.String("proxy", "", "RocketMQ 5.x proxy `address` (host:port), for the gRPC client")
	var topics stringsFlag
	f.Var(&topics, "topic", "with --proxy, a `topic` the rows go to, whose route the gRPC client learns before it starts (it never starts without one); repeat the flag for each topic, or name one: the others are learned at their first send")
	batch := f.Int("batch", 100, "most `rows` one claim takes")
	concurrency := f.Int("concurrency", 16, "ordering `keys` shipped at once")
	lease := f.Duration("lease", 30*time.Second, "how long a claim holds its rows")
	poll := f.Duration("poll-interval", 20*time.Millisecond, "how long an idle relay waits before it looks for rows again")
	minBackoff := f.Duration("min-backoff", 100*time.Millisecond, "wait before a failed row is sent again, doubling with each failure")
	maxBackoff := f.Duration("max-backoff", time.Minute, "longest wait before a failed row is sent again")
	del := f.Bool("delete", false, "delete shipped rows instead of marking them sent")
	retention := f.Duration("retention", 24*time.Hour, "how long rows marked sent stay")
	drain := f.Duration("drain-timeout", 10*time.Second, "on SIGINT or SIGTERM, how long the rows held may take to ship")
	logLevel := f.String("log-level", "warn", "log `level`: debug, info, warn or error")
	notify := f.Bool("notify", false, "PostgreSQL only: look for rows as soon as they are committed, woken by LISTEN/NOTIFY through the trigger that 'idemq migrate --outbox --notify' installs (package outbox/pgwake); --poll-interval then only bounds how late a lost wake-up makes the relay")
	e := &env{stdout: stdout}
	rest, err := f.parse(e, args)
	if err != nil {
		return err
	}
	switch {
	case len(rest) > 0:
		return f.usageErr("unexpected arguments %q", rest)
	case (*namesrv == "") == (*proxy == ""):
		return f.usageErr("give --namesrv ADDR (remoting client) or --proxy ADDR (gRPC client)")
	case *proxy != "" && len(topics) == 0:
		return f.usageErr("--proxy: name a topic the rows go to with --topic TOPIC: the gRPC client learns its settings from the proxy through a topic's route, and never starts without one")
	case *namesrv != "" && len(topics) > 0:
		return f.usageErr("--topic is for --proxy: the remoting client needs no topic to start")
	}
	if *notify {
		if addr, err := resolveStore(*f.store); err == nil && addr.Dialect != sqldialect.Postgres {
			return f.usageErr("--notify: %s is not PostgreSQL: LISTEN/NOTIFY wakes relays on PostgreSQL only; other stores are polled every --poll-interval", addr)
		}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return f.usageErr("--log-level %q: want debug, info, warn or error", *logLevel)
	}
	cfg := outbox.RelayConfig{Batch: *batch, Concurrency: *concurrency, PollInterval: *poll, Lease: *lease,
		MinBackoff: *minBackoff, MaxBackoff: *maxBackoff, Delete: *del, Retention: *retention, DrainTimeout: *drain}
	if err := cfg.Validate(); err != nil {
		return f.usageErr("%v", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(stderr, opts)
	if *f.json {
		h = slog.NewJSONHandler(stderr, opts)
	}
	cfg.Logger = slog.New(h)

	startCtx, cancel := f.context(ctx)
	defer cancel()
	o, addr, closeFn, err := f.open(startCtx)
	if err != nil {
		return err
	}
	defer closeFn()
	if _, err := o.Count(startCtx); err != nil {
		return f.failure("relay", addr, err)
	}
	if *notify {
		l, err := pgwake.Listen(startCtx, addr.DSN, o.Table())
		if err != nil {
			return fmt.Errorf("relay: listen for new rows at %s: %w", addr, err)
		}
		defer l.Close()
		cfg.Wake = l.C
	}
	var (
		s    outbox.Sender
		stop func()
		to   string
	)
	if *namesrv != "" {
		s, stop, err = remotingSender(*namesrv)
		to = "name server " + *namesrv
	} else {
		s, stop, err = grpcSender(startCtx, *proxy, topics)
		to = "proxy " + *proxy
	}
	if err != nil {
		return fmt.Errorf("relay: start the client for %s: %w", to, err)
	}
	defer stop()
	r, err := outbox.NewRelay(o, s, cfg)
	if err != nil {
		return f.usageErr("%v", err)
	}
	fmt.Fprintf(stdout, "relaying %s at %s to %s\n", o.Table(), addr, to)
	<-ctx.Done()
	r.Close()
	st := r.Stats()
	fmt.Fprintf(stdout, "stopped: shipped %d, retried %d, parked %d, lease lost %d\n", st.Shipped, st.Retried, st.Parked, st.LeaseLost)
	return nil
}

// remotingSender starts a remoting producer whose queue follows the
// sharding key, and returns the OutboxSender over it and its stop.
func remotingSender(namesrv string) (outbox.Sender, func(), error) {
	rp, err := rocketmq.NewProducer(
		rmqproducer.WithNsResolver(primitive.NewPassthroughResolver([]string{namesrv})),
		rmqproducer.WithGroupName("idemq_relay"),
		rmqproducer.WithInstanceName(fmt.Sprintf("idemq-relay-%d", os.Getpid())),
		rmqproducer.WithQueueSelector(rmqproducer.NewHashQueueSelector()),
	)
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

// grpcSender starts a gRPC producer on proxy that knows topics' routes and
// returns the OutboxSender over it and its stop. The client's Start takes
// no context and waits for the proxy's settings for as long as it takes,
// so ctx bounds the wait here: a relay that cannot start exits rather
// than hang.
func grpcSender(ctx context.Context, proxy string, topics []string) (outbox.Sender, func(), error) {
	gp, err := golang.NewProducer(&golang.Config{Endpoint: proxy, Credentials: &credentials.SessionCredentials{}}, golang.WithTopics(topics...))
	if err != nil {
		return nil, nil, err
	}
	started := make(chan error, 1)
	go func() { started <- gp.Start() }()
	select {
	case err := <-started:
		if err != nil {
			return nil, nil, err
		}
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("no answer from the proxy within --timeout: %w", context.Cause(ctx))
	}
	stop := func() { gp.GracefulStop() }
	s, err := grpcv5.NewOutboxSender(gp)
	if err != nil {
		stop()
		return nil, nil, err
	}
	return s, stop, nil
}
