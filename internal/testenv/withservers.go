package testenv

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Starter starts a server of the named kind ("redis", "mysql", "postgres",
// "rocketmq", "rocketmq5", "kafka", "nats"), its log to log, and returns once it serves:
// [Start] from the local installation, or another source with the same
// contract (internal/testenv/containers, from container images).
type Starter func(ctx context.Context, name string, log io.Writer) (*Server, error)

// NewServer returns a Server that a [Starter] other than Start started:
// env names it to another process (the IDEMQ_* variables, see
// [Server.Env]), stop stops it and removes everything it made.
func NewServer(name, addr, version string, env map[string]string, started time.Duration, stop func() error) *Server {
	return &Server{Name: name, Addr: addr, Version: version, Env: env, Started: started, stop: stop}
}

// WithServers is the withservers command, named prog, with servers from
// start: it parses args ([-only a,b] [-v] -- command [args...]), starts the
// servers asked for (all known by default) in parallel unless their
// variable already names one, exports their IDEMQ_* variables, runs the
// command, stops the servers when it exits or on SIGINT/SIGTERM, and
// returns the exit code for os.Exit.
func WithServers(prog string, args []string, start Starter) int {
	logger := log.New(os.Stderr, prog+": ", 0)
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	only := fs.String("only", "", "comma-separated servers to start (default: all known)")
	verbose := fs.Bool("v", false, "copy the servers' logs to stderr")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		logger.Printf("usage: %s [-only redis,mysql,postgres,rocketmq,rocketmq5,kafka,nats] [-v] -- command [args...]", prog)
		return 1
	}
	known := Services()
	names := slices.Sorted(maps.Keys(known))
	if *only != "" {
		names = strings.Split(*only, ",")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	servers, err := startAll(ctx, logger, start, names, known, *verbose)
	if err != nil {
		logger.Print(err)
		return stopServers(logger, servers, 1)
	}

	cmd := exec.Command(fs.Arg(0), fs.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		logger.Print(err)
		return stopServers(logger, servers, 1)
	}
	go func() {
		<-ctx.Done()
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}()
	code := 0
	if err := cmd.Wait(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			logger.Print(err)
		}
		code = 1
		if ee != nil && ee.ExitCode() > 0 {
			code = ee.ExitCode()
		}
	}
	return stopServers(logger, servers, code)
}

// stopServers stops the servers and returns code.
func stopServers(logger *log.Logger, servers []*Server, code int) int {
	for _, s := range servers {
		if err := s.Stop(); err != nil {
			logger.Printf("stop %s: %v", s.Name, err)
		}
	}
	return code
}

// startAll starts the named servers in parallel and exports their
// addresses. Servers already named by their variable are left alone.
func startAll(ctx context.Context, logger *log.Logger, start Starter, names []string, known map[string]string, verbose bool) ([]*Server, error) {
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		servers []*Server
		errs    []error
	)
	logw := io.Discard
	if verbose {
		logw = os.Stderr
	}
	for _, name := range names {
		env, ok := known[name]
		if !ok {
			return nil, fmt.Errorf("unknown server %q", name)
		}
		if v := os.Getenv(env); v != "" {
			logger.Printf("%s: using %s=%s", name, env, v)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := start(ctx, name, logw)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("start %s: %w", name, err))
				return
			}
			servers = append(servers, s)
			var set []string
			for _, k := range slices.Sorted(maps.Keys(s.Env)) {
				os.Setenv(k, s.Env[k])
				set = append(set, k+"="+s.Env[k])
			}
			logger.Printf("%s %s started in %v: %s", name, s.Version, s.Started.Round(time.Millisecond), strings.Join(set, " "))
		}()
	}
	wg.Wait()
	return servers, errors.Join(errs...)
}
