// Command withservers runs a command with real servers beside it: it starts
// the servers (unless their IDEMQ_* variable already names one), exports
// their addresses in the IDEMQ_* variables, runs the command, and stops the
// servers when it exits or on SIGINT/SIGTERM.
//
//	go run ./internal/testenv/withservers -only redis,rocketmq -- go run ./examples/receiver
//
// make test and make demo use it so that every test package shares one set
// of servers.
package main

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

	"github.com/idemq/idemq/internal/testenv"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("withservers: ")
	only := flag.String("only", "", "comma-separated servers to start (default: all known)")
	verbose := flag.Bool("v", false, "copy the servers' logs to stderr")
	flag.Parse()
	if flag.NArg() == 0 {
		log.Fatal("usage: withservers [-only redis,mysql,postgres,rocketmq,rocketmq5] [-v] -- command [args...]")
	}
	known := testenv.Services()
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range known {
			if !yield(n) {
				return
			}
		}
	})
	if *only != "" {
		names = strings.Split(*only, ",")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	servers, err := startAll(ctx, names, known, *verbose)
	if err != nil {
		log.Print(err)
		exit(servers, 1)
	}

	cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		log.Print(err)
		exit(servers, 1)
	}
	go func() {
		<-ctx.Done()
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}()
	code := 0
	if err := cmd.Wait(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			log.Print(err)
		}
		code = 1
		if ee != nil && ee.ExitCode() > 0 {
			code = ee.ExitCode()
		}
	}
	exit(servers, code)
}

// exit stops the servers, then exits: os.Exit skips deferred calls.
func exit(servers []*testenv.Server, code int) {
	for _, s := range servers {
		if err := s.Stop(); err != nil {
			log.Printf("stop %s: %v", s.Name, err)
		}
	}
	os.Exit(code)
}

// startAll starts the named servers in parallel and exports their
// addresses. Servers already named by their variable are left alone.
func startAll(ctx context.Context, names []string, known map[string]string, verbose bool) ([]*testenv.Server, error) {
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		servers []*testenv.Server
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
			log.Printf("%s: using %s=%s", name, env, v)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := testenv.Start(ctx, name, logw)
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
			log.Printf("%s %s started in %v: %s", name, s.Version, s.Started.Round(time.Millisecond), strings.Join(set, " "))
		}()
	}
	wg.Wait()
	return servers, errors.Join(errs...)
}
