package idgen_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/internal/testkit"
)

func TestFileStore(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sub", "node-1.hwm")
	s, err := idgen.OpenFileStore(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if got, err := s.Load(ctx); err != nil || !got.IsZero() {
		t.Fatalf("Load of a missing file: %v, %v", got, err)
	}
	for _, want := range []time.Time{t0, t0.Add(-time.Hour), t0.Add(time.Nanosecond)} {
		if err := s.Save(ctx, want); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Load(ctx); err != nil || !got.Equal(want) {
			t.Fatalf("Load: %v, %v; want %v", got, err, want)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 2 { // the mark and its lock file
		t.Fatalf("temporary files left: %v", entries)
	}
	for _, bad := range []string{"", "x\n", "-5\n", "1.5"} {
		if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Load(ctx); err == nil {
			t.Errorf("Load of %q: no error", bad)
		}
	}
}

// A restart with the clock behind the previous run's mark never reissues an
// ID, whatever the policy, whether the previous run was closed or crashed.
func TestRestartBehindHighWaterMark(t *testing.T) {
	const reserve = time.Second
	tests := []struct {
		name   string
		policy func() idgen.RollbackPolicy
		layout idgen.Layout
		// The second run either issues IDs at once or fails with
		// ErrClockBackwards until the clock passes the mark.
		issues bool
	}{
		{"refuse", func() idgen.RollbackPolicy { return nil }, idgen.Twitter, false},
		{"wait", func() idgen.RollbackPolicy { return idgen.Wait{Max: time.Millisecond} }, idgen.Twitter, false},
		{"bump", func() idgen.RollbackPolicy { return idgen.BumpGeneration{} }, idgen.RollbackBits, false},
		{"borrow", func() idgen.RollbackPolicy { return idgen.Borrow{MaxAhead: 2 * time.Hour} }, idgen.Twitter, true},
	}
	for _, tt := range tests {
		for _, crash := range []bool{false, true} {
			name := tt.name + "/closed"
			if crash {
				name = tt.name + "/crashed"
			}
			t.Run(name, func(t *testing.T) {
				store, err := idgen.OpenFileStore(filepath.Join(t.TempDir(), "hwm"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { store.Close() })
				clock := testkit.NewClock(t0, time.Microsecond)
				const node = 1
				cfg := idgen.Config{Layout: tt.layout, Clock: clock, Store: store, Reserve: reserve, Rollback: tt.policy()}
				g1, err := idgen.New(node, cfg)
				if err != nil {
					t.Fatal(err)
				}
				first := make([]idgen.ID, 10000)
				if _, err := g1.Fill(context.Background(), first); err != nil {
					t.Fatal(err)
				}
				end := clock.Now()
				if !crash {
					if err := g1.Close(); err != nil {
						t.Fatal(err)
					}
				}

				// The clock of the next run is an hour behind.
				clock.Set(t0.Add(-time.Hour))
				g2 := testkit.Generator(t, node, cfg)
				second := make([]idgen.ID, 10000)
				_, err = g2.Fill(context.Background(), second)
				if tt.issues {
					if err != nil {
						t.Fatalf("second run: %v", err)
					}
				} else {
					if !errors.Is(err, idgen.ErrClockBackwards) {
						t.Fatalf("second run an hour behind: %v", err)
					}
					// Just past the previous run's last tick: a
					// closed run's exact mark lets it go on, a
					// crashed run's reservation does not.
					clock.Set(end.Add(time.Millisecond))
					_, err = g2.Fill(context.Background(), second)
					if crash && !errors.Is(err, idgen.ErrClockBackwards) {
						t.Fatalf("second run inside the reservation: %v", err)
					}
					if crash {
						clock.Set(end.Add(reserve + time.Millisecond))
						_, err = g2.Fill(context.Background(), second)
					}
					if err != nil {
						t.Fatalf("second run past the mark: %v", err)
					}
				}
				testkit.CheckUnique(t, append(first, second...))
				if !tt.issues {
					// Time order holds across the restart.
					testkit.CheckIncreasing(t, append(first, second...))
				}
			})
		}
	}
}

// failingStore fails its saves.
type failingStore struct{ err error }

func (s failingStore) Load(context.Context) (time.Time, error) { return time.Time{}, nil }
func (s failingStore) Save(context.Context, time.Time) error   { return s.err }

func TestStoreErrors(t *testing.T) {
	down := errors.New("disk full")
	g := testkit.Generator(t, 0, idgen.Config{Store: failingStore{down}})
	if _, err := g.Next(context.Background()); !errors.Is(err, down) {
		t.Fatalf("Next with a failing store: %v", err)
	}

	path := filepath.Join(t.TempDir(), "hwm")
	if err := os.WriteFile(path, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	store, err := idgen.OpenFileStore(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	g = testkit.Generator(t, 0, idgen.Config{Store: store})
	if _, err := g.Next(context.Background()); err == nil {
		t.Fatal("Next with an unreadable mark: no error")
	}
}

func TestCloseSavesExactMark(t *testing.T) {
	store, err := idgen.OpenFileStore(filepath.Join(t.TempDir(), "hwm"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	clock := testkit.NewClock(t0, 0)
	g := testkit.Generator(t, 0, idgen.Config{Clock: clock, Store: store})
	testkit.Next(t, g)
	if mark, _ := store.Load(context.Background()); !mark.Equal(t0.Add(time.Second + time.Millisecond)) {
		t.Fatalf("reserved mark %v, want t0+1.001s", mark)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if mark, _ := store.Load(context.Background()); !mark.Equal(t0.Add(time.Millisecond)) {
		t.Fatalf("mark after Close %v, want t0+1ms", mark)
	}
}

// A FileStore holds its file for one generator: a second store on the same
// path fails with ErrInvalidConfig until the first is closed; a closed store
// used again takes the file again, or fails while another holds it.
func TestFileStoreLock(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sub", "node-1.hwm")
	first, err := idgen.OpenFileStore(path)
	if err != nil {
		t.Fatalf("first store: %v", err)
	}
	_, err = idgen.OpenFileStore(path)
	if !errors.Is(err, idgen.ErrInvalidConfig) {
		t.Fatalf("second store while the first is open: %v, want ErrInvalidConfig", err)
	}
	checkLockedMessage(t, err, path)
	if err := first.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// The second store takes the file once the first lets go.
	second, err := idgen.OpenFileStore(path)
	if err != nil {
		t.Fatalf("second store after the first closed: %v", err)
	}
	// A closed store used again takes the lock again, so it now fails
	// in its turn, whether it loads or saves.
	if _, err := first.Load(ctx); !errors.Is(err, idgen.ErrInvalidConfig) {
		t.Fatalf("closed store loading while another holds the file: %v", err)
	}
	if err := first.Save(ctx, t0); !errors.Is(err, idgen.ErrInvalidConfig) {
		t.Fatalf("closed store saving while another holds the file: %v", err)
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	if err := first.Save(ctx, t0); err != nil {
		t.Fatalf("closed store used again once free: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestOpenFileStoreErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// A directory cannot be made where a file stands.
	s, err := idgen.OpenFileStore(filepath.Join(file, "hwm"))
	if err == nil || errors.Is(err, idgen.ErrInvalidConfig) {
		s.Close()
		t.Fatalf("OpenFileStore under a file: %v", err)
	}
}

// checkLockedMessage fails unless err names the mark's file and both ways
// out: a file per node, or stopping the other generator.
func checkLockedMessage(t *testing.T, err error, path string) {
	t.Helper()
	msg := err.Error()
	for _, want := range []string{path, "own file", "stop"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
}

// The cross-process tests run this test binary again with helperStoreEnv
// set: its init then opens the store at that path as helperModeEnv says,
// reports the outcome on a line of its own and exits before any test runs.
const (
	helperStoreEnv = "IDGEN_TEST_HELPER_STORE"
	helperModeEnv  = "IDGEN_TEST_HELPER_MODE"
)

func init() {
	if path := os.Getenv(helperStoreEnv); path != "" {
		os.Exit(storeHelper(path, os.Getenv(helperModeEnv)))
	}
}

// storeHelper is the helper process's work; it returns the exit code.
func storeHelper(path, mode string) int {
	var s *idgen.FileStore
	var err error
	switch mode {
	case "open", "hold":
		s, err = idgen.OpenFileStore(path)
	default:
		fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
		return 2
	}
	switch {
	case errors.Is(err, idgen.ErrInvalidConfig):
		fmt.Printf("helper: locked: %v\n", err)
	case err != nil:
		fmt.Printf("helper: error: %v\n", err)
	default:
		fmt.Printf("helper: opened\n")
	}
	if err == nil && mode == "hold" {
		// Hold the store until killed, until stdin closes (the parent
		// closed it or went), or for a minute at most.
		closed := make(chan struct{})
		go func() {
			io.Copy(io.Discard, os.Stdin)
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(time.Minute):
		}
	}
	if s != nil {
		s.Close()
	}
	return 0
}

// helper returns the command that runs the store helper on path.
func helper(t *testing.T, path, mode string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("cannot re-run the test binary: %v", err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperStoreEnv+"="+path, helperModeEnv+"="+mode)
	return cmd
}

// helperOutcome runs a helper to its end and returns what it reported:
// "opened", "locked: <error>" or "error: <error>".
func helperOutcome(t *testing.T, path, mode string) string {
	t.Helper()
	out, err := helper(t, path, mode).CombinedOutput()
	for line := range strings.Lines(string(out)) {
		if r, ok := strings.CutPrefix(line, "helper: "); ok {
			return strings.TrimSpace(r)
		}
	}
	t.Fatalf("helper process reported nothing: %v\n%s", err, out)
	return ""
}

// startHolder starts a helper that opens the store at path and holds it
// until stdin is closed; it returns once the helper holds the store.
func startHolder(t *testing.T, path string) (cmd *exec.Cmd, stdin io.Closer) {
	t.Helper()
	cmd = helper(t, path, "hold")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "helper: opened" {
		t.Fatalf("holder process: %q, %v", line, err)
	}
	go io.Copy(io.Discard, stdout)
	return cmd, stdin
}

// Two processes given the same file: the second fails until the first
// closes its store, or exits.
func TestFileStoreLockAcrossProcesses(t *testing.T) {
	t.Run("this process holds", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "node-1.hwm")
		s, err := idgen.OpenFileStore(path)
		if err != nil {
			t.Fatal(err)
		}
		got := helperOutcome(t, path, "open")
		if !strings.HasPrefix(got, "locked: ") || !strings.Contains(got, path) {
			t.Fatalf("open in another process while this one holds the file: %s", got)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if got := helperOutcome(t, path, "open"); got != "opened" {
			t.Fatalf("open in another process after Close: %s", got)
		}
	})
	t.Run("another process holds", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "node-1.hwm")
		holder, stdin := startHolder(t, path)
		_, err := idgen.OpenFileStore(path)
		if !errors.Is(err, idgen.ErrInvalidConfig) {
			t.Fatalf("OpenFileStore while another process holds the file: %v", err)
		}
		checkLockedMessage(t, err, path)
		if pid := strconv.Itoa(holder.Process.Pid); !strings.Contains(err.Error(), pid) {
			t.Errorf("error %q does not name the holder's pid %s", err, pid)
		}
		// The holder exits in good order once its stdin closes.
		stdin.Close()
		if err := holder.Wait(); err != nil {
			t.Fatalf("holder: %v", err)
		}
		s, err := idgen.OpenFileStore(path)
		if err != nil {
			t.Fatalf("OpenFileStore after the holder exited: %v", err)
		}
		s.Close()
	})
}
