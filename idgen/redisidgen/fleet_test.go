package redisidgen_test

// Fleet tests: generators in separate OS processes (this test binary run
// again as a child) lease node ids from one real Redis, while the parent
// kills, stops and restarts things. Every ID a child issues is written to a
// file; an ID it issued but did not write was never used by anyone, so the
// files are what must hold no duplicates.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/redisidgen"
	"github.com/idemq/idemq/internal/testenv"
)

// childEnv marks a run of this binary as a fleet child.
const childEnv = "IDEMQ_FLEET_CHILD"

// Exit codes of a child.
const (
	exitOK     = 0
	exitFailed = 1
	exitNoNode = 3
)

func init() {
	if os.Getenv(childEnv) != "" {
		os.Exit(fleetChild())
	}
}

// fleetChild leases a node and issues IDs: FLEET_COUNT of them, or, with 0,
// about 64 per millisecond until its standard input closes. It prints
// "node N" once it holds a node and "fenced" the first time the generator
// refuses to issue because its lease is not live.
func fleetChild() int {
	env := func(k string) string { return os.Getenv("FLEET_" + k) }
	size, _ := strconv.ParseInt(env("SIZE"), 10, 64)
	lease, _ := time.ParseDuration(env("LEASE"))
	count, _ := strconv.Atoi(env("COUNT"))
	client := redis.NewClient(&redis.Options{Addr: env("REDIS")})
	defer client.Close()
	leaser, err := redisidgen.New(client, redisidgen.Config{Pool: env("POOL"), Size: size, Lease: lease})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitFailed
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	gen, err := idgen.NewLeased(ctx, leaser, idgen.Config{
		Rollback: idgen.Wait{Max: time.Minute},
		Lease:    idgen.LeaseConfig{Wait: env("WAIT") == "1", Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))},
	})
	if errors.Is(err, idgen.ErrNoFreeNode) {
		fmt.Fprintln(os.Stderr, err)
		return exitNoNode
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitFailed
	}
	fmt.Printf("node %d\n", gen.Node())
	f, err := os.Create(env("OUT"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitFailed
	}
	w := bufio.NewWriterSize(f, 1<<16)
	stop := make(chan struct{})
	if count == 0 {
		go func() {
			io.Copy(io.Discard, os.Stdin)
			close(stop)
		}()
	}
	ids := make([]idgen.ID, 64)
	var buf [8]byte
	fenced := false
	flushed := time.Now()
	for issued := 0; count == 0 || issued < count; {
		n := len(ids)
		if count > 0 {
			n = min(n, count-issued)
		}
		n, err = gen.Fill(ctx, ids[:n])
		for _, id := range ids[:n] {
			binary.LittleEndian.PutUint64(buf[:], uint64(id))
			w.Write(buf[:])
		}
		issued += n
		if errors.Is(err, idgen.ErrLeaseExpired) && !fenced {
			fenced = true
			fmt.Println("fenced")
		} else if err != nil && !errors.Is(err, idgen.ErrLeaseExpired) {
			fmt.Fprintln(os.Stderr, err)
			return exitFailed
		}
		if count > 0 {
			continue
		}
		if time.Since(flushed) > 5*time.Millisecond {
			w.Flush()
			flushed = time.Now()
		}
		select {
		case <-stop:
			count = -1 // leave the loop
		case <-time.After(time.Millisecond):
		}
		if count < 0 {
			break
		}
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitFailed
	}
	f.Close()
	if err := gen.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitFailed
	}
	fmt.Println("done")
	return exitOK
}

// fleet runs children against one pool.
type fleet struct {
	t     *testing.T
	redis string
	pool  string
	size  int64
	lease time.Duration
	dir   string
	n     atomic.Int32
}

func newFleet(t *testing.T, redisAddr string, size int64, lease time.Duration) *fleet {
	t.Helper()
	return &fleet{t: t, redis: redisAddr, pool: "fleet-" + strings.ReplaceAll(t.Name(), "/", "-"), size: size, lease: lease, dir: t.TempDir()}
}

// create makes the pool new, so that the first lease need not wait out the
// lost-data fence.
func (f *fleet) create() {
	f.t.Helper()
	client := redis.NewClient(&redis.Options{Addr: f.redis})
	defer client.Close()
	l, err := redisidgen.New(client, redisidgen.Config{Pool: f.pool, Size: f.size, Lease: f.lease})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := l.Create(context.Background()); err != nil {
		f.t.Fatal(err)
	}
}

// child is one running child process.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   string
	lines chan string
	exit  chan int
	node  int64
}

// start runs a child that issues count IDs (0: until stop), waiting for a
// node if wait.
func (f *fleet) start(count int, wait bool) *child {
	f.t.Helper()
	out := filepath.Join(f.dir, fmt.Sprintf("ids-%03d", f.n.Add(1)))
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	w := "0"
	if wait {
		w = "1"
	}
	cmd.Env = append(os.Environ(), childEnv+"=1",
		"FLEET_REDIS="+f.redis, "FLEET_POOL="+f.pool, "FLEET_SIZE="+strconv.FormatInt(f.size, 10),
		"FLEET_LEASE="+f.lease.String(), "FLEET_COUNT="+strconv.Itoa(count), "FLEET_WAIT="+w, "FLEET_OUT="+out)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		f.t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		f.t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &syncWriter{w: &stderr}
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	c := &child{cmd: cmd, stdin: stdin, out: out, lines: make(chan string, 16), exit: make(chan int, 1), node: -1}
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			c.lines <- s.Text()
		}
		close(c.lines)
		err := cmd.Wait()
		code := cmd.ProcessState.ExitCode()
		if code == exitFailed {
			f.t.Logf("child %d failed: %v\n%s", cmd.Process.Pid, err, stderr.String())
		}
		c.exit <- code
	}()
	f.t.Cleanup(func() { cmd.Process.Kill() })
	return c
}

// syncWriter serialises writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// await returns the child's next line, or "" once it exited.
func (c *child) await(t *testing.T, timeout time.Duration) string {
	t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			return ""
		}
		if n, ok := strings.CutPrefix(l, "node "); ok {
			c.node, _ = strconv.ParseInt(n, 10, 64)
		}
		return l
	case <-time.After(timeout):
		t.Errorf("child %d said nothing for %v", c.cmd.Process.Pid, timeout)
		return "timeout"
	}
}

// stop asks a child issuing until stopped to finish, and waits for it.
func (c *child) stop(t *testing.T) int {
	t.Helper()
	c.stdin.Close()
	return c.wait(t)
}

func (c *child) wait(t *testing.T) int {
	t.Helper()
	for range c.lines {
	}
	select {
	case code := <-c.exit:
		return code
	case <-time.After(time.Minute):
		t.Errorf("child %d did not exit", c.cmd.Process.Pid)
		return -1
	}
}

func (c *child) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// ids reads the IDs a child wrote.
func (c *child) ids(t *testing.T) []uint64 {
	t.Helper()
	b, err := os.ReadFile(c.out)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	ids := make([]uint64, len(b)/8)
	for i := range ids {
		ids[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return ids
}

// duplicates counts the IDs that appear more than once in all of sets.
func duplicates(sets ...[]uint64) (total, dups int) {
	var all []uint64
	for _, s := range sets {
		all = append(all, s...)
	}
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			dups++
		}
	}
	return len(all), dups
}

func bounds(ids []uint64) (lo, hi uint64) {
	return slices.Min(ids), slices.Max(ids)
}

// N processes race for M < N node ids: exactly M hold one, the others fail
// at start with ErrNoFreeNode.
func TestFleetRaceForNodes(t *testing.T) {
	f := newFleet(t, testenv.Redis(t), 3, 2*time.Second)
	f.create()
	var kids []*child
	for range 7 {
		kids = append(kids, f.start(0, false))
	}
	held := map[int64]bool{}
	refused := 0
	for _, c := range kids {
		switch l := c.await(t, 30*time.Second); {
		case strings.HasPrefix(l, "node "):
			if held[c.node] {
				t.Errorf("node %d held by two processes", c.node)
			}
			held[c.node] = true
		case l == "":
			if code := c.wait(t); code != exitNoNode {
				t.Errorf("refused child exited %d, want %d (no free node)", code, exitNoNode)
			}
			refused++
		default:
			t.Errorf("child said %q", l)
		}
	}
	if len(held) != 3 || refused != 4 {
		t.Fatalf("%d processes hold nodes %v and %d were refused; want 3 and 4", len(held), held, refused)
	}
	var sets [][]uint64
	for _, c := range kids {
		if c.node >= 0 {
			if code := c.stop(t); code != exitOK {
				t.Errorf("holder exited %d", code)
			}
			sets = append(sets, c.ids(t))
		}
	}
	if n, d := duplicates(sets...); d != 0 || n == 0 {
		t.Fatalf("%d IDs, %d duplicates", n, d)
	}
}

// kill -9 a holder: its node is granted again only after its lease, and
// the new holder's IDs are all greater than every ID the old one issued.
func TestFleetKilledHolder(t *testing.T) {
	const lease = 2 * time.Second
	f := newFleet(t, testenv.Redis(t), 1, lease)
	f.create()
	a := f.start(0, false)
	if l := a.await(t, 30*time.Second); l != "node 0" {
		t.Fatalf("first holder said %q", l)
	}
	time.Sleep(lease) // a few renewals
	a.signal(t, syscall.SIGKILL)
	killed := time.Now()
	a.wait(t)
	b := f.start(0, true)
	if l := b.await(t, 30*time.Second); l != "node 0" {
		t.Fatalf("next holder said %q", l)
	}
	// The lease had at least two thirds left at the kill (renewals come
	// every third of it).
	if waited := time.Since(killed); waited < lease/2 {
		t.Fatalf("node granted again %v after its holder was killed, within its %v lease", waited, lease)
	}
	time.Sleep(100 * time.Millisecond)
	b.stop(t)
	old, next := a.ids(t), b.ids(t)
	if len(old) == 0 || len(next) == 0 {
		t.Fatalf("old holder wrote %d IDs, new holder %d", len(old), len(next))
	}
	_, oldMax := bounds(old)
	nextMin, _ := bounds(next)
	if nextMin <= oldMax {
		t.Fatalf("new holder's first ID %d is not above the killed holder's last %d", nextMin, oldMax)
	}
}

// SIGSTOP a holder past its lease, let another process take the node,
// SIGCONT: the stopped one issues nothing until it holds a lease again.
func TestFleetStoppedHolder(t *testing.T) {
	const lease = time.Second
	f := newFleet(t, testenv.Redis(t), 1, lease)
	f.create()
	a := f.start(0, false)
	if l := a.await(t, 30*time.Second); l != "node 0" {
		t.Fatalf("first holder said %q", l)
	}
	time.Sleep(lease / 2)
	a.signal(t, syscall.SIGSTOP)
	time.Sleep(lease + lease/2)
	b := f.start(0, true)
	if l := b.await(t, 30*time.Second); l != "node 0" {
		t.Fatalf("next holder said %q", l)
	}
	a.signal(t, syscall.SIGCONT)
	if l := a.await(t, 10*time.Second); l != "fenced" {
		t.Fatalf("resumed holder said %q, want fenced", l)
	}
	time.Sleep(lease) // it retries to lease, and fails: the pool is full
	a.stop(t)
	b.stop(t)
	stopped, next := a.ids(t), b.ids(t)
	if n, d := duplicates(stopped, next); d != 0 {
		t.Fatalf("%d of %d IDs issued twice", d, n)
	}
	_, stoppedMax := bounds(stopped)
	nextMin, _ := bounds(next)
	if stoppedMax >= nextMin {
		t.Fatalf("the stopped holder issued %d after the new holder's first ID %d", stoppedMax, nextMin)
	}
}

// 8 processes × 1M IDs over a pool of 4 node ids with churn: processes
// exit, are killed and start again, waiting for a free node; no ID is
// issued twice.
func TestFleetChurn(t *testing.T) {
	if testing.Short() {
		t.Skip("8M IDs")
	}
	const (
		slots   = 8
		perSlot = 1_000_000
		perProc = 125_000
	)
	f := newFleet(t, testenv.Redis(t), 4, time.Second)
	f.create()
	var (
		mu   sync.Mutex
		sets [][]uint64
		wg   sync.WaitGroup
	)
	for s := range slots {
		wg.Go(func() {
			for p := 0; p < perSlot/perProc; p++ {
				c := f.start(perProc, true)
				if s%4 == 0 && p%3 == 1 {
					// Killed once it holds a node: its lease must expire.
					if l := c.await(t, time.Minute); !strings.HasPrefix(l, "node ") {
						t.Errorf("child said %q", l)
					}
					time.Sleep(20 * time.Millisecond)
					c.signal(t, syscall.SIGKILL)
					c.wait(t)
				} else if code := c.wait(t); code != exitOK {
					t.Errorf("child exited %d", code)
				}
				ids := c.ids(t)
				mu.Lock()
				sets = append(sets, ids)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	n, d := duplicates(sets...)
	t.Logf("%d processes issued %d IDs over 4 node ids", len(sets), n)
	if d != 0 {
		t.Fatalf("%d of %d IDs issued twice", d, n)
	}
	if n < slots*perSlot*3/4 {
		t.Fatalf("only %d IDs issued", n)
	}
}

// Bad input at start: a clear error, never a guessed node.
func TestFleetBadStart(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer dead.Close()
	l, err := redisidgen.New(dead, redisidgen.Config{Pool: "dead", Size: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if g, err := idgen.NewLeased(ctx, l, idgen.Config{Lease: idgen.LeaseConfig{Logger: quiet}}); err == nil || g != nil {
		t.Fatalf("NewLeased with Redis unreachable = %v, %v; want an error", g, err)
	} else if !strings.Contains(err.Error(), "127.0.0.1:1") && !strings.Contains(err.Error(), "connect") {
		t.Errorf("error does not say what failed: %v", err)
	}
}

// Redis restarted without persistence mid-run: the holders lose their
// leases and fence themselves, the pool grants nothing for one lease, then
// they lease nodes again — perhaps each other's — and no ID is issued
// twice.
func TestFleetRedisRestart(t *testing.T) {
	const lease = time.Second
	srv := testenv.StartPrivateRedis(t)
	f := newFleet(t, srv.Addr(), 2, lease)
	f.create()
	a, b := f.start(0, false), f.start(0, false)
	for _, c := range []*child{a, b} {
		if l := c.await(t, 30*time.Second); !strings.HasPrefix(l, "node ") {
			t.Fatalf("child said %q", l)
		}
	}
	before := map[*child]int64{a: a.node, b: b.node}
	time.Sleep(lease / 2)
	if err := srv.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	for _, c := range []*child{a, b} {
		if l := c.await(t, 10*time.Second); l != "fenced" {
			t.Fatalf("child on node %d said %q after the restart, want fenced", before[c], l)
		}
	}
	// They lease again once the pool's fence has passed, and go on.
	time.Sleep(3 * lease)
	a.stop(t)
	b.stop(t)
	ia, ib := a.ids(t), b.ids(t)
	if n, d := duplicates(ia, ib); d != 0 {
		t.Fatalf("%d of %d IDs issued twice", d, n)
	}
	fenceEnd, err := idgen.Twitter.Compose(restarted.Add(lease), 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ids := range [][]uint64{ia, ib} {
		if _, hi := bounds(ids); hi < uint64(fenceEnd) {
			t.Fatalf("a holder issued nothing after the pool's fence (last ID %d)", hi)
		}
	}
}
