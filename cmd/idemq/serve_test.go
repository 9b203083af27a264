package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/redisidgen"
	"github.com/idemq/idemq/internal/testenv"
)

// daemon is a running serve or relay of the built binary.
type daemon struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	later  chan []string // the lines on stdout after the first, once it exits
	termed bool
}

// startDaemon starts the binary with args, killed when t ends, and waits
// for its first line on stdout, which must begin with prefix (it runs):
// it returns the rest of that line.
func startDaemon(t *testing.T, prefix string, args ...string) (*daemon, string) {
	t.Helper()
	d := &daemon{t: t, cmd: exec.Command(binary(t), args...), stderr: &bytes.Buffer{}, later: make(chan []string, 1)}
	d.cmd.Stderr = d.stderr
	stdout, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.cmd.Process.Kill() })
	first := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(stdout)
		lines.Scan()
		first <- lines.Text()
		var later []string
		for lines.Scan() {
			later = append(later, lines.Text())
		}
		d.later <- later
	}()
	select {
	case line := <-first:
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			d.cmd.Process.Kill()
			d.cmd.Wait()
			t.Fatalf("%s printed %q, want %s...; stderr:\n%s", args[0], line, prefix, d.stderr)
		}
		return d, rest
	case <-time.After(time.Minute): // a hang, not a timing check
		t.Fatalf("%s printed nothing within a minute; stderr:\n%s", args[0], d.stderr)
		return nil, ""
	}
}

// term sends SIGTERM.
func (d *daemon) term() {
	d.t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		d.t.Fatal(err)
	}
	d.termed = true
}

// stop sends SIGTERM, unless term did (a second one could come after the
// command stopped catching them), fails t unless the command then exits 0
// within a minute, and returns the lines it printed after the first.
func (d *daemon) stop() []string {
	d.t.Helper()
	if !d.termed {
		d.term()
	}
	select {
	case later := <-d.later: // stdout read to its end, before Wait closes it
		if err := d.cmd.Wait(); err != nil {
			d.t.Errorf("%s exited with %v after SIGTERM, want 0; stderr:\n%s", d.cmd.Args[1], err, d.stderr)
		}
		return later
	case <-time.After(time.Minute):
		d.t.Fatalf("%s still running a minute after SIGTERM", d.cmd.Args[1])
		return nil
	}
}

// server is a running `idemq serve` of the built binary.
type server struct {
	*daemon
	base string
}

// startServe starts the binary's serve with args and waits until it
// listens.
func startServe(t *testing.T, args ...string) *server {
	t.Helper()
	d, addr := startDaemon(t, "listening on ", append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	return &server{d, "http://" + addr}
}

// stop stops the server as daemon.stop does; it prints nothing on stdout
// but its address.
func (s *server) stop() {
	s.t.Helper()
	if later := s.daemon.stop(); len(later) > 0 {
		s.t.Errorf("serve printed more than its address on stdout: %q", later)
	}
}

// get returns path's status and body.
func (s *server) get(path string) (int, string) {
	s.t.Helper()
	resp, err := http.Get(s.base + path)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// metrics returns the server's /metrics.
func (s *server) metrics() string {
	s.t.Helper()
	status, body := s.get("/metrics")
	if status != 200 {
		s.t.Fatalf("metrics = %d %s", status, body)
	}
	return body
}

// TestServe runs the binary on every store: segment IDs of a tag made with
// `idemq segment create`, snowflake IDs of the node given, health, then a
// SIGTERM ends it with status 0.
func TestServe(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			store := b.url(t)
			tag := unique("serve")
			if r := inProcess(t, "", "segment", "create", tag, "--step", "100", "--start", "5000", "--store", store); r.code != 0 {
				t.Fatalf("segment create: %v", r)
			}
			s := startServe(t, "--store", store, "--node", "7", "--log-level", "info", "--json")
			for i := range int64(3) {
				if status, body := s.get("/api/segment/get/" + tag); status != 200 || body != idgen.ID(5000+i).String() {
					t.Errorf("segment ID %d = %d %q, want %d", i, status, body, 5000+i)
				}
			}
			status, body := s.get("/api/snowflake/get/x")
			if status != 200 {
				t.Fatalf("snowflake = %d %s", status, body)
			}
			_, body = s.get("/api/snowflake/decode/" + body)
			var d struct{ Node int64 }
			if err := json.Unmarshal([]byte(body), &d); err != nil || d.Node != 7 {
				t.Errorf("decode = %s (%v), want node 7", body, err)
			}
			if status, body := s.get("/healthz"); status != 200 {
				t.Errorf("healthz = %d %s", status, body)
			}
			s.stop()
			// JSON logs at info: the start and the clean stop.
			for _, msg := range []string{`"msg":"listening"`, `"msg":"stopped"`, `"tag":"` + tag + `"`} {
				if !strings.Contains(s.stderr.String(), msg) {
					t.Errorf("stderr lacks %s:\n%s", msg, s.stderr)
				}
			}
		})
	}
}

// TestServeLeased leases the snowflake node from a Redis pool and releases
// it on SIGTERM.
func TestServeLeased(t *testing.T) {
	addr := testenv.Redis(t)
	pool := unique("serve-pool")
	s := startServe(t, "--lease-store", "redis://"+addr+"/0", "--pool", pool, "--pool-size", "4", "--lease", "1s")
	status, body := s.get("/api/snowflake/batch/k?count=3")
	if status != 200 || !strings.HasPrefix(body, `{"ids":["`) {
		t.Fatalf("batch = %d %s", status, body)
	}
	if status, body := s.get("/api/segment/get/x"); status != 404 || !strings.Contains(body, `"code":"not_served"`) {
		t.Errorf("segment without --store = %d %s, want 404 not_served", status, body)
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	l, err := redisidgen.New(c, redisidgen.Config{Pool: pool, Size: 4, Lease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	live := func() int {
		leases, err := l.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return len(leases)
	}
	if n := live(); n != 1 {
		t.Errorf("%d live leases while serving, want 1", n)
	}
	s.stop()
	if n := live(); n != 0 {
		t.Errorf("%d live leases after the stop, want 0: the node was not released", n)
	}
	if s.stderr.Len() > 0 {
		t.Errorf("serve logged at its default level, which should be quiet:\n%s", s.stderr)
	}
}

// TestServeDrains: a request under way when SIGTERM comes is answered
// before the process exits 0. The request is the first for a tag, whose load
// waits while its Redis holds writes back (CLIENT PAUSE).
func TestServeDrains(t *testing.T) {
	rd := testenv.StartPrivateRedis(t)
	store := "redis://" + rd.Addr() + "/0"
	if r := inProcess(t, "", "segment", "create", "slow", "--step", "10", "--start", "100", "--store", store); r.code != 0 {
		t.Fatalf("segment create: %v", r)
	}
	s := startServe(t, "--store", store)
	c := redis.NewClient(&redis.Options{Addr: rd.Addr()})
	defer c.Close()
	if err := c.Do(context.Background(), "CLIENT", "PAUSE", "3000", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		status int
		body   string
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := http.Get(s.base + "/api/segment/get/slow")
		if err != nil {
			answered <- answer{0, err.Error()}
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		answered <- answer{resp.StatusCode, string(body)}
	}()
	// The request is under way once the server counted it.
	for !strings.Contains(s.metrics(), `idemq_http_requests_total{endpoint="segment_get"} 1`) {
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case a := <-answered:
		t.Fatalf("the request was answered before SIGTERM (%d %s): the pause did not hold it", a.status, a.body)
	default:
	}
	s.term()
	if a := <-answered; a.status != 200 || a.body != "100" {
		t.Errorf("request under way at SIGTERM = %d %q, want 200 100", a.status, a.body)
	}
	s.stop()
}
