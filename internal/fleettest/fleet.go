package fleettest

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
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
)

// Fleet runs children of the test binary against one pool.
type Fleet struct {
	t    *testing.T
	pool Pool
	env  []string
	dir  string
	n    atomic.Int32
}

// New returns a fleet leasing from a pool of size node ids with leases of
// lease, named after t and unique to the run: test runs that share a server
// (two checkouts, or -count) must not lease from one pool. env holds the
// backend settings every child's [NewLeaser] reads by key.
func New(t *testing.T, size int64, lease time.Duration, env map[string]string) *Fleet {
	t.Helper()
	name := fmt.Sprintf("fleet-%.40s-%s", strings.ReplaceAll(t.Name(), "/", "-"), strings.ToLower(rand.Text()[:8]))
	f := &Fleet{
		t:    t,
		pool: Pool{Name: name, Size: size, Lease: lease},
		dir:  t.TempDir(),
	}
	for k, v := range env {
		f.env = append(f.env, envPrefix+k+"="+v)
	}
	return f
}

// Pool returns the fleet's pool.
func (f *Fleet) Pool() Pool { return f.pool }

// Proc is one running child process.
type Proc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   string
	lines chan string
	exit  chan int
	// Node is the node the child said it holds, -1 until it does.
	Node int64
}

// Start runs a child that issues count IDs (0: until [Proc.Stop]),
// waiting for a free node if wait. The child is killed when the test ends.
func (f *Fleet) Start(count int, wait bool) *Proc {
	f.t.Helper()
	out := filepath.Join(f.dir, fmt.Sprintf("ids-%03d", f.n.Add(1)))
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	w := "0"
	if wait {
		w = "1"
	}
	cmd.Env = append(os.Environ(), childEnv+"=1",
		envPrefix+"POOL="+f.pool.Name, envPrefix+"SIZE="+strconv.FormatInt(f.pool.Size, 10),
		envPrefix+"LEASE="+f.pool.Lease.String(), envPrefix+"COUNT="+strconv.Itoa(count),
		envPrefix+"WAIT="+w, envPrefix+"OUT="+out)
	cmd.Env = append(cmd.Env, f.env...)
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
	c := &Proc{cmd: cmd, stdin: stdin, out: out, lines: make(chan string, 16), exit: make(chan int, 1), Node: -1}
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			c.lines <- s.Text()
		}
		close(c.lines)
		err := cmd.Wait()
		code := cmd.ProcessState.ExitCode()
		if code == ExitFailed {
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

// Await returns the child's next line, or "" once it exited; after
// "node N" it sets Node.
func (c *Proc) Await(t *testing.T, timeout time.Duration) string {
	t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			return ""
		}
		if n, ok := strings.CutPrefix(l, "node "); ok {
			c.Node, _ = strconv.ParseInt(n, 10, 64)
		}
		return l
	case <-time.After(timeout):
		t.Errorf("child %d said nothing for %v", c.cmd.Process.Pid, timeout)
		return "timeout"
	}
}

// Stop asks a child issuing until stopped to finish, and waits for it.
func (c *Proc) Stop(t *testing.T) int {
	t.Helper()
	c.stdin.Close()
	return c.Wait(t)
}

// Wait waits for the child to exit, and returns its exit code.
func (c *Proc) Wait(t *testing.T) int {
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

// Signal sends sig to the child.
func (c *Proc) Signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// IDs reads the IDs the child wrote.
func (c *Proc) IDs(t *testing.T) []uint64 {
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

// Duplicates counts the IDs that appear more than once in all of sets.
func Duplicates(sets ...[]uint64) (total, dups int) {
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

// Bounds returns the least and the greatest of ids, which must not be
// empty.
func Bounds(ids []uint64) (lo, hi uint64) {
	return slices.Min(ids), slices.Max(ids)
}
