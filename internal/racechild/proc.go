package racechild

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

// Proc is a child process started by [Start]: the test binary run again in
// a role. Its standard output is its side of the protocol, a line per
// [Say]; closing its standard input asks it to stop ([Stopped]); its
// standard error is kept for the test log and for [CheckExit].
type Proc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	errs  syncBuffer

	mu    sync.Mutex
	lines []string      // said and not read yet
	more  chan struct{} // a line or the exit came
	done  chan struct{} // closed once the child exited and its output is read

	// Signalled is when [Proc.Signal] last sent a signal; Exited, when
	// the child was seen to exit. Read them after the child exited.
	Signalled, Exited time.Time
}

// Start runs the test binary again as role (dispatched by [Main]) with
// settings, which the child reads with [Settings], and env (NAME=value
// pairs) added to its environment; name names it in failures. The child
// is killed when the test ends, or should this process die first.
func Start(t testing.TB, role, name string, settings any, env ...string) *Proc {
	t.Helper()
	js, err := json.Marshal(settings)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// Its race reports go to its standard error, where CheckExit reads
	// them, even from a test that runs in a child of [Test], whose own go
	// to files (log_path).
	gorace := slices.DeleteFunc(strings.Fields(os.Getenv("GORACE")), func(o string) bool { return strings.HasPrefix(o, "log_path=") })
	cmd.Env = append(append(os.Environ(), env...), roleEnv+"="+role, settingsEnv+"="+string(js),
		// Under -race, a process sleeps 1 s in exit while its other
		// goroutines run on: a child that exits at once would not.
		"GORACE="+strings.Join(append(gorace, "atexit_sleep_ms=0"), " "))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &Proc{name: name, cmd: cmd, more: make(chan struct{}, 1), done: make(chan struct{})}
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
	go p.read(stdout)
	t.Cleanup(func() {
		cmd.Process.Kill()
		p.stdin.Close()
		<-p.done
		if t.Failed() {
			t.Logf("%s (pid %d) standard error, last lines:\n%s", name, cmd.Process.Pid, lastLines(p.errs.String(), 40))
		}
	})
	return p
}

// read queues the lines of stdout until the child exits.
func (p *Proc) read(stdout io.Reader) {
	for s := bufio.NewScanner(stdout); s.Scan(); {
		p.mu.Lock()
		p.lines = append(p.lines, s.Text())
		p.mu.Unlock()
		p.notify()
	}
	p.cmd.Wait()
	p.Exited = time.Now()
	close(p.done)
	p.notify()
}

func (p *Proc) notify() {
	select {
	case p.more <- struct{}{}:
	default:
	}
}

// Name is the name the child was started with.
func (p *Proc) Name() string { return p.name }

// Pid is the child's process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Stderr is what the child wrote to its standard error so far.
func (p *Proc) Stderr() string { return p.errs.String() }

// Next returns the child's next line, or false once it exited having said
// nothing more. It fails t if the child says nothing for timeout.
func (p *Proc) Next(t testing.TB, timeout time.Duration) (string, bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		if l, ok := p.Said(); ok {
			return l, true
		}
		select {
		case <-p.done:
			p.mu.Lock()
			n := len(p.lines)
			p.mu.Unlock()
			if n == 0 {
				return "", false
			}
		case <-p.more:
		case <-deadline.C:
			t.Fatalf("%s said nothing for %v", p.name, timeout)
		}
	}
}

// Said returns the child's next line without waiting, if it said one that
// was not read yet.
func (p *Proc) Said() (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.lines) == 0 {
		return "", false
	}
	l := p.lines[0]
	p.lines = p.lines[1:]
	return l, true
}

// Expect returns the rest of the child's next line that starts with
// prefix, passing over other lines. It fails t if the child exits first or
// takes longer than timeout.
func (p *Proc) Expect(t testing.TB, prefix string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		l, ok := p.Next(t, time.Until(deadline))
		if !ok {
			t.Fatalf("%s exited (%v) before saying %q", p.name, p.cmd.ProcessState, prefix)
		}
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			return rest
		}
	}
}

// Tell tells the child line, which it reads from [Told].
func (p *Proc) Tell(t testing.TB, line string) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
}

// Stop asks the child to stop: it closes the child's standard input.
func (p *Proc) Stop() { p.stdin.Close() }

// Signal sends sig to the child.
func (p *Proc) Signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	p.Signalled = time.Now()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
}

// Kill kills the child with SIGKILL and waits for it to exit.
func (p *Proc) Kill(t testing.TB) {
	t.Helper()
	p.Signal(t, syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not exit within 10s of SIGKILL", p.name)
	}
}

// Pause stops the child with SIGSTOP.
func (p *Proc) Pause(t testing.TB) {
	t.Helper()
	p.Signal(t, syscall.SIGSTOP)
}

// Resume lets the child, paused, go on with SIGCONT.
func (p *Proc) Resume(t testing.TB) {
	t.Helper()
	p.Signal(t, syscall.SIGCONT)
}

// Wait waits for the child to exit and fails t unless it passed by the
// package's rule, tolerating races wholly inside libraries (none for nil).
// It returns the lines the child said that no one read. It fails t if
// the child has not exited after timeout.
func (p *Proc) Wait(t testing.TB, timeout time.Duration, libraries []string) []string {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %v", p.name, timeout)
	}
	p.mu.Lock()
	rest := p.lines
	p.lines = nil
	p.mu.Unlock()
	CheckExit(t, p.name, p.cmd.ProcessState.ExitCode(), p.errs.String(), libraries)
	return rest
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
