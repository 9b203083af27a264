// Package testenv hands tests the address of a real Redis, MariaDB/MySQL,
// PostgreSQL, Apache RocketMQ (4.9.7, and 5.x with its gRPC proxy), Apache
// Kafka (4.x, KRaft) or NATS (nats-server with JetStream) server.
//
// Each accessor looks, in order, for
//
//  1. an environment variable naming a running server (IDEMQ_REDIS_ADDR,
//     IDEMQ_MYSQL_DSN, IDEMQ_POSTGRES_DSN, IDEMQ_ROCKETMQ_NAMESRV,
//     IDEMQ_ROCKETMQ5_NAMESRV with IDEMQ_ROCKETMQ5_PROXY, IDEMQ_KAFKA_BROKERS,
//     IDEMQ_NATS_URL);
//  2. a server it starts from the local installation (Debian's packages, the
//     RocketMQ and Kafka jars from Maven Central, nats-server built from its
//     Go module) on a free loopback port with its data
//     in a temporary directory,
//
// and otherwise skips the test naming what is missing. With CI=true that
// skip is a failure: CI must never pass by testing nothing.
//
// A server is started once per test binary, on first use, and stopped by
// [Run], which a package's TestMain calls:
//
//	func TestMain(m *testing.M) { os.Exit(testenv.Run(m)) }
package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is a running server this package started.
type Server struct {
	// Name is the kind of server: "redis", "mysql", "postgres", "rocketmq",
	// "rocketmq5", "kafka", "nats".
	Name string
	// Addr is what a client needs: host:port, or a DSN for SQL servers.
	Addr string
	// Version is the server's own version string.
	Version string
	// Started is how long the start took, install steps included.
	Started time.Duration
	// Env names the server to another process: the IDEMQ_* variables and
	// their values, which withservers exports. Most servers have one, its
	// value Addr; rocketmq5 has two (name server and proxy).
	Env map[string]string

	stop func() error
}

// Stop stops the server and removes its data.
func (s *Server) Stop() error {
	if s.stop == nil {
		return nil
	}
	return s.stop()
}

// service is one kind of backend a test can ask for.
type service struct {
	name string
	// env names a running server; also lists more variables that must be
	// set with it (their values are in Server.Env when testenv starts it).
	env   string
	also  []string
	local func(ctx context.Context, dir string, log io.Writer) (*Server, error)
}

type instance struct {
	srv *Server
	err error
}

var (
	mu      sync.Mutex
	running = map[string]*instance{}
)

// StartTimeout bounds starting one server, install steps included.
const StartTimeout = 3 * time.Minute

// lookup returns the address of svc for tb, starting it on first use.
func lookup(tb testing.TB, svc service) string {
	tb.Helper()
	return lookupEnv(tb, svc)[svc.env]
}

// lookupEnv returns the variables naming svc's server for tb (svc.env and
// svc.also), from the environment or from the server it starts on first
// use.
func lookupEnv(tb testing.TB, svc service) map[string]string {
	tb.Helper()
	if v := os.Getenv(svc.env); v != "" {
		env := map[string]string{svc.env: v}
		for _, name := range svc.also {
			if env[name] = os.Getenv(name); env[name] == "" {
				tb.Fatalf("testenv: %s: %s is set but %s is not", svc.name, svc.env, name)
			}
		}
		return env
	}
	mu.Lock()
	inst, ok := running[svc.name]
	if !ok {
		inst = &instance{}
		inst.srv, inst.err = Start(context.Background(), svc.name, io.Discard)
		running[svc.name] = inst
		if inst.err == nil {
			tb.Logf("testenv: started %s %s at %s in %v", svc.name, inst.srv.Version, inst.srv.Addr, inst.srv.Started.Round(time.Millisecond))
		}
	}
	mu.Unlock()
	if inst.err != nil {
		Missing(tb, fmt.Sprintf("%s: set %s or install it: %v", svc.name, strings.Join(append([]string{svc.env}, svc.also...), " and "), inst.err))
	}
	return inst.srv.Env
}

// Missing skips tb because a backend is missing, or fails it under CI=true.
func Missing(tb testing.TB, why string) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf("testenv: backend missing under CI: %s", why)
		return
	}
	tb.Skipf("testenv: backend missing: %s", why)
}

// Run runs the tests and stops every server started for them. Use it from
// TestMain.
func Run(m *testing.M) int {
	code := m.Run()
	StopAll()
	return code
}

// StopAll stops every server started by the accessors.
func StopAll() {
	mu.Lock()
	defer mu.Unlock()
	for name, inst := range running {
		if inst.srv != nil {
			if err := inst.srv.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "testenv: stop %s: %v\n", name, err)
			}
		}
		delete(running, name)
	}
}

var services = map[string]service{}

func register(s service) { services[s.name] = s }

// Services lists the kinds of server Start knows, with the environment
// variable that names a running one.
func Services() map[string]string {
	out := make(map[string]string, len(services))
	for name, s := range services {
		out[name] = s.env
	}
	return out
}

// Start starts a server of the named kind from the local installation. Its
// log goes to log. (Docker users run docker/compose.yaml and set the IDEMQ_*
// variables: a container fallback here would put testcontainers and the
// Docker SDK into the go.sum of every module that imports idemq.)
func Start(ctx context.Context, name string, log io.Writer) (*Server, error) {
	svc, ok := services[name]
	if !ok {
		return nil, fmt.Errorf("testenv: unknown service %q", name)
	}
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	begin := time.Now()
	dir, err := os.MkdirTemp("", "idemq-"+name+"-")
	if err != nil {
		return nil, fmt.Errorf("testenv: %s: %w", name, err)
	}
	srv, err := svc.local(ctx, dir, log)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	srv.Started = time.Since(begin)
	if srv.Env == nil {
		srv.Env = map[string]string{svc.env: srv.Addr}
	}
	stop := srv.stop
	srv.stop = func() error { return errors.Join(stop(), os.RemoveAll(dir)) }
	return srv, nil
}

// process is a server process in its own process group.
type process struct {
	name   string
	cmd    *exec.Cmd
	done   chan struct{}
	err    error
	logf   string
	signal syscall.Signal
}

// startProcess runs name with args, its output appended to logPath and log.
// When the test binary dies, the kernel kills the server too.
func startProcess(log io.Writer, logPath string, cred *syscall.Credential, name string, args ...string) (*process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout = io.MultiWriter(f, log)
	cmd.Stderr = cmd.Stdout
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: filepath.Base(name), cmd: cmd, done: make(chan struct{}), logf: logPath, signal: syscall.SIGTERM}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports the process's end, if it has ended.
func (p *process) exited() error {
	select {
	case <-p.done:
		tail, _ := tailFile(p.logf, 20)
		return fmt.Errorf("exited: %v\n%s", p.err, tail)
	default:
		return nil
	}
}

// stop ends the process group gently (by p.signal), then by force. It
// reports a process that had died before.
func (p *process) stop() error {
	if err := p.exited(); err != nil {
		return fmt.Errorf("%s %w", p.name, err)
	}
	pgid := -p.cmd.Process.Pid
	_ = syscall.Kill(pgid, p.signal)
	select {
	case <-p.done:
		return nil
	case <-time.After(15 * time.Second):
	}
	_ = syscall.Kill(pgid, syscall.SIGKILL)
	<-p.done
	return nil
}

// waitReady polls ready until it succeeds, the process dies or ctx ends.
func waitReady(ctx context.Context, p *process, ready func(context.Context) error) error {
	var last error
	for {
		if err := p.exited(); err != nil {
			return err
		}
		if last = ready(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			tail, _ := tailFile(p.logf, 20)
			return fmt.Errorf("not ready: %w (last: %v)\n%s", ctx.Err(), last, tail)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// run runs a setup command, returning its output in the error.
func run(ctx context.Context, cred *syscall.Credential, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", filepath.Base(name), err, out)
	}
	return nil
}

// freePort returns a loopback TCP port nobody listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// findBinary returns the first of names found on PATH or in dirs.
func findBinary(dirs []string, names ...string) (string, error) {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
		for _, d := range dirs {
			p := filepath.Join(d, n)
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("none of %s found", strings.Join(names, ", "))
}

// tailFile returns the last n lines of the file at path, for errors.
func tailFile(path string, n int) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	// The end of a log is enough; the broker's grows large.
	const window = 16 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > window {
		if _, err := f.Seek(-window, io.SeekEnd); err != nil {
			return "", err
		}
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return "", err
	}
	return lastLines(string(b), n), nil
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}
