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

// server is a running `idemq serve` of the built binary.
type server struct {
	t      *testing.T
	cmd    *exec.Cmd
	base   string
	stderr *bytes.Buffer
	out    chan string // stdout after the first line
	termed bool
}

// startServe starts the binary's serve with args and waits until it
// listens.
func startServe(t *testing.T, args ...string) *server {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	s := &server{t: t, cmd: cmd, stderr: &bytes.Buffer{}, out: make(chan string, 1)}
	cmd.Stderr = s.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	first := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		first <- line
		rest, _ := io.ReadAll(r)
		s.out <- string(rest)
	}()
	select {
	case line := <-first:
		addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
		if !ok {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("serve printed %q, want listening on ADDR; stderr:\n%s", line, s.stderr)
		}
		s.base = "http://" + addr
	case <-time.After(time.Minute): // a hang, not a timing check
		t.Fatalf("serve did not listen within a minute; stderr:\n%s", s.stderr)
	}
	return s
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

// term sends SIGTERM.
func (s *server) term() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.t.Fatal(err)
	}
	s.termed = true
}

// stop sends SIGTERM, unless term did, and returns the exit status. (A
// second one could come after the command stopped catching them.)
func (s *server) stop() int {
	s.t.Helper()
	if !s.termed {
		s.term()
	}
	err := s.cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	} else if err != nil {
		s.t.Fatal(err)
	}
	if rest := <-s.out; rest != "" {
		s.t.Errorf("serve printed more than its address on stdout: %q", rest)
	}
	return 0
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
			if code := s.stop(); code != 0 {
				t.Errorf("exit %d after SIGTERM, want 0; stderr:\n%s", code, s.stderr)
			}
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
	if code := s.stop(); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0; stderr:\n%s", code, s.stderr)
	}
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
	if code := s.stop(); code != 0 {
		t.Errorf("exit %d, want 0; stderr:\n%s", code, s.stderr)
	}
}
