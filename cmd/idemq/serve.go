package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/idhttp"
)

const serveDoc = `Serve IDs over HTTP in the URL shapes of Meituan's Leaf:

  GET /api/snowflake/get/{key}            one snowflake ID as decimal text
  GET /api/snowflake/batch/{key}?count=N  {"ids":["…",…]}
  GET /api/snowflake/decode/{id}          the ID's fields, JSON
  GET /api/segment/get/{tag}              the next ID of a segment tag
  GET /api/segment/batch/{tag}?count=N    {"ids":["…",…]}
  GET /healthz, GET /metrics              health (503 when unable to issue), Prometheus metrics

Snowflake IDs need a node id unique among all generators running at the same
time, so there is none by default: name one with --node, or lease one from a
worker-id pool with --lease-store URL --pool P. Segment IDs come from the tags
in --store (create them with 'idemq segment create'). Give either or both.

It prints "listening on ADDR" once it accepts requests. On SIGINT or SIGTERM
it stops accepting, lets the requests under way finish for up to
--drain-timeout, then releases the leased node. Logs go to stderr: warnings
and errors only, unless --log-level says otherwise.`

// serveCmd runs `idemq serve`, which main's run dispatches to, and returns
// the exit status: 0 after a clean shutdown on SIGINT or SIGTERM (the end of
// ctx), 1 when it cannot start or its drain timed out, 2 for a usage error.
func serveCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return report(serve(ctx, args, stdout, stderr), stderr)
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newSegmentFlags("idemq serve", "--listen ADDR [--store URL] [--node N | --lease-store URL --pool P] [flags]", serveDoc)
	f.Lookup("json").Usage = "log JSON lines instead of text"
	f.Lookup("timeout").Usage = "give up starting after `D`: opening stores, leasing a node"
	f.Lookup("store").Usage = "segment " + storeUsage + "; none: no segment IDs"
	f.Lookup("namespace").Usage = "Redis key `namespace` of the tags and of the worker-id pool"
	listen := f.String("listen", "", "`address` to listen on, e.g. :8080 or 127.0.0.1:0 (required)")
	layoutName := layoutFlag(f.flags)
	node := f.String("node", "", "snowflake node `id` (or datacenter:worker), unique among running generators")
	leaseStore := f.String("lease-store", "", "lease the snowflake node from the worker-id pool in this store `URL`")
	pool := f.String("pool", "", "worker-id `pool` name, with --lease-store")
	poolSize := f.Int64("pool-size", 0, "node ids in a new pool (default the layout's node count, at most 65536 on SQL); an existing Redis pool keeps its own")
	lease := f.Duration("lease", 0, "lease length of a new pool (default 10s); an existing Redis pool keeps its own")
	poolTable := f.String("pool-table", workerLeaseTable, "SQL `table` of the pool")
	maxBatch := f.Int("max-batch", 1000, "largest count a batch request may ask for")
	drain := f.Duration("drain-timeout", 10*time.Second, "on SIGINT or SIGTERM, how long requests under way may take to finish")
	logLevel := f.String("log-level", "warn", "log `level`: debug, info, warn or error")
	e := &env{stdout: stdout}
	rest, err := f.parse(e, args)
	if err != nil {
		return err
	}

	// Check the whole command line before touching any store.
	switch {
	case len(rest) > 0:
		return f.usageErr("unexpected arguments %q", rest)
	case *listen == "":
		return f.usageErr("--listen is required: the address to serve on, e.g. :8080")
	case *drain <= 0:
		return f.usageErr("--drain-timeout %v: want a positive duration", *drain)
	case *maxBatch < 1:
		return f.usageErr("--max-batch %d: want at least 1", *maxBatch)
	case *leaseStore == "" && *pool != "":
		return f.usageErr("--pool needs --lease-store URL")
	case *leaseStore != "" && *pool == "":
		return f.usageErr("--lease-store needs --pool: the name of the worker-id pool")
	case *node != "" && *leaseStore != "":
		return f.usageErr("give --node or --lease-store, not both: a leased node is chosen by the pool")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return f.usageErr("--log-level %q: want debug, info, warn or error", *logLevel)
	}
	l, err := layoutByName(f.flags, *layoutName)
	if err != nil {
		return err
	}
	nodeID := int64(-1)
	if *node != "" {
		if nodeID, err = parseNode(l, *node); err != nil {
			return f.usageErr("%v", err)
		}
	}
	segments := *f.store != "" || os.Getenv(storeEnv) != ""
	if nodeID < 0 && *leaseStore == "" && !segments {
		return f.usageErr("nothing to serve: give --node N (unique among running generators, 0 to %d for layout %s) or --lease-store URL --pool P for snowflake IDs, and/or --store URL for segment IDs", l.MaxNode(), l.Name)
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(stderr, opts)
	if *f.json {
		h = slog.NewJSONHandler(stderr, opts)
	}
	log := slog.New(h)

	startCtx, cancel := f.context(ctx)
	defer cancel()
	cfg := idhttp.Config{MaxBatch: *maxBatch, Logger: log}
	if segments {
		src, addr, closeSrc, err := f.open(startCtx, false)
		if err != nil {
			return err
		}
		defer closeSrc()
		cfg.Segments = src
		log.Info("serving segment IDs", "store", addr.String())
	}
	switch {
	case *leaseStore != "":
		gen, closeLeaser, err := leaseGenerator(startCtx, l, *leaseStore, poolConfig{
			pool: *pool, namespace: *f.namespace, table: *poolTable, size: *poolSize, lease: *lease,
		}, idgen.LeaseConfig{Logger: log}, *f.timeout)
		if err != nil {
			return err
		}
		defer closeLeaser()
		// Closed before the leaser's connection: Close releases the node.
		defer closeGenerator(gen, log)
		cfg.Snowflake = gen
	case nodeID >= 0:
		gen, err := idgen.New(nodeID, idgen.Config{Layout: l})
		if err != nil {
			return f.usageErr("%v", err)
		}
		defer func() {
			closeGenerator(gen, log)
			// The next run on this node must start in a later tick
			// than this one's last ID.
			time.Sleep(l.Unit)
		}()
		cfg.Snowflake = gen
	}
	if g := cfg.Snowflake; g != nil {
		log.Info("serving snowflake IDs", "layout", l.Name, "node", g.Node())
	}
	srv, err := idhttp.New(cfg)
	if err != nil {
		return err
	}
	defer srv.Close()

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *listen, err)
	}
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(h, slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	fmt.Fprintf(stdout, "listening on %s\n", ln.Addr())
	log.Info("listening", "addr", ln.Addr().String())

	select {
	case err := <-served:
		return fmt.Errorf("serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	log.Info("shutting down", "drain_timeout", *drain)
	drainCtx, cancelDrain := context.WithTimeout(context.WithoutCancel(ctx), *drain)
	defer cancelDrain()
	if err := hs.Shutdown(drainCtx); err != nil {
		hs.Close()
		return fmt.Errorf("drain: requests still under way after --drain-timeout %v were cut: %w", *drain, err)
	}
	<-served // http.ErrServerClosed
	log.Info("stopped")
	return nil
}

// closeGenerator closes gen, which saves or releases its node, and logs a
// failure: the exit status is the shutdown's.
func closeGenerator(gen *idgen.Generator, log *slog.Logger) {
	if err := gen.Close(); err != nil {
		log.Warn("release the snowflake node", "node", gen.Node(), "err", err)
	}
}
