package consumerfault

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// childEnv names a child's role; set, the test binary runs that role
// instead of the tests (see init in main_test.go).
const childEnv = "IDEMQ_CONSUMERFAULT_CHILD"

// settingsEnv carries a child's [settings], as JSON.
const settingsEnv = "IDEMQ_CONSUMERFAULT_SETTINGS"

// settings is what a child needs to know.
type settings struct {
	Namesrv  string
	Proxy    string // the 5.x proxy's gRPC endpoint, for the gRPC roles
	Redis    string
	Topic    string
	Group    string
	Instance string // the rocketmq client's instance name, unique per client
	Prefix   string // of the dedupe records
	Ledger   string
	Lease    time.Duration
	// Work is how long a worker's handler takes; it applies its effect
	// after a fifth of it.
	Work time.Duration
	// Shutdown has a worker, on SIGTERM, call the push consumer's Shutdown
	// (a gRPC worker: its SimpleConsumer's GracefulStop) and exit at once,
	// instead of draining: the control of the rolling restart.
	Shutdown bool
}

// proc is a child: the test binary run again in a role. Its standard
// output is its protocol, a line per event; its standard error is kept for
// the test log.
type proc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser // closed, the child exits
	lines chan string
	done  chan struct{} // closed once the child exited and its output is read
	errs  syncBuffer
	// signalled is when the last signal was sent; exited, when the child
	// was seen to exit (set before done is closed).
	signalled, exited time.Time
}

// startProc runs role with s, and kills it when the test ends.
func startProc(t *testing.T, role, name string, s settings) *proc {
	t.Helper()
	js, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// Its race reports go to its standard error, where
	// racechild.CheckExit reads them, even from a test that runs in a
	// racechild child, whose own go to files (log_path).
	gorace := slices.DeleteFunc(strings.Fields(os.Getenv("GORACE")), func(o string) bool { return strings.HasPrefix(o, "log_path=") })
	cmd.Env = append(os.Environ(), childEnv+"="+role, settingsEnv+"="+string(js),
		// Under -race, a process sleeps 1 s in exit while its other
		// goroutines run on: a child that exits "at once" would not.
		"GORACE="+strings.Join(append(gorace, "atexit_sleep_ms=0"), " "))
	// Should this process die first, the kernel kills the child.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &proc{name: name, cmd: cmd, lines: make(chan string, 1024), done: make(chan struct{})}
	cmd.Stderr = &p.errs
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		cmd.Wait()
		p.exited = time.Now()
		close(p.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		p.stdin.Close()
		for range p.lines {
		}
		<-p.done
		if t.Failed() {
			t.Logf("%s (pid %d) standard error, last lines:\n%s", name, cmd.Process.Pid, lastLines(p.errs.String(), 40))
		}
	})
	return p
}

// next returns the child's next line, or false once the child has exited.
// It fails t after timeout.
func (p *proc) next(t *testing.T, timeout time.Duration) (string, bool) {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		return l, ok
	case <-time.After(timeout):
		t.Fatalf("%s said nothing for %v", p.name, timeout)
		return "", false
	}
}

// expect returns the rest of the child's next line that starts with
// prefix, skipping other lines; it fails t if the child exits first.
func (p *proc) expect(t *testing.T, prefix string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		l, ok := p.next(t, time.Until(deadline))
		if !ok {
			t.Fatalf("%s exited (%v) before saying %q", p.name, p.cmd.ProcessState, prefix)
		}
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			return rest
		}
	}
}

// signal sends sig to the child.
func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	p.signalled = time.Now()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
}

// wait waits for the child to exit and returns its exit code and the lines
// it said that no one read.
func (p *proc) wait(t *testing.T, timeout time.Duration) (code int, rest []string) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-p.lines:
			if ok {
				rest = append(rest, l)
				continue
			}
			<-p.done
			return p.cmd.ProcessState.ExitCode(), rest
		case <-deadline:
			t.Fatalf("%s did not exit within %v", p.name, timeout)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
