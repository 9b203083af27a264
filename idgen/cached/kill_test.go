package cached_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/cached"
)

// The kill test runs this test binary again with cachedHelperEnv set to a
// FileStore's path and cachedModeEnv to "pad" or "next".
const (
	cachedHelperEnv = "IDGEN_TEST_CACHED_STORE"
	cachedModeEnv   = "IDGEN_TEST_CACHED_MODE"
)

// slowLayout issues two IDs a millisecond, so that a buffer of 4096 runs
// two seconds ahead of the clock: far enough that a process started after
// a kill would reissue the padded IDs if the store's mark did not cover
// them.
var slowLayout = idgen.Layout{
	Name: "slow", TimeBits: 41, WorkerBits: 4, SequenceBits: 1,
	Unit: time.Millisecond, Epoch: idgen.Twitter.Epoch,
}

func init() {
	if path := os.Getenv(cachedHelperEnv); path != "" {
		os.Exit(cachedHelper(path, os.Getenv(cachedModeEnv)))
	}
}

// cachedHelper is the helper process: "pad" fills a Cached buffer, prints
// the newest ID padded and waits to be killed; "next" prints the first ID a
// generator on the same store issues.
func cachedHelper(path, mode string) int {
	ctx := context.Background()
	store, err := idgen.OpenFileStore(path)
	if err != nil {
		fmt.Printf("helper: error: %v\n", err)
		return 1
	}
	g, err := idgen.New(1, idgen.Config{Layout: slowLayout, Store: store, Rollback: idgen.Borrow{MaxAhead: 3 * time.Second, Else: idgen.Wait{Max: 5 * time.Second}}})
	if err != nil {
		fmt.Printf("helper: error: %v\n", err)
		return 1
	}
	if mode == "next" {
		id, err := g.Next(ctx)
		if err != nil {
			fmt.Printf("helper: error: %v\n", err)
			return 1
		}
		fmt.Printf("helper: next %d\n", id)
		return 0
	}
	c, err := cached.New(ctx, g, cached.Config{Size: 4096})
	if err != nil {
		fmt.Printf("helper: error: %v\n", err)
		return 1
	}
	taken, err := c.Next(ctx)
	if err != nil {
		fmt.Printf("helper: error: %v\n", err)
		return 1
	}
	for c.Stats().Buffered < 4096-1 {
		time.Sleep(time.Millisecond)
	}
	fmt.Printf("helper: padded %d %d\n", taken, c.Stats().Newest)
	time.Sleep(time.Minute) // until killed
	return 0
}

// TestCachedKilled: a process padding a Cached buffer two seconds ahead of
// the clock is killed with SIGKILL, and a process started at once on the
// same FileStore issues only IDs above every ID the first one padded, taken
// or not: the stored mark covers the borrowed time.
func TestCachedKilled(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "node-1.hwm")
	start := func(mode string) (*exec.Cmd, *bufio.Reader) {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), cachedHelperEnv+"="+path, cachedModeEnv+"="+mode)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd, bufio.NewReader(out)
	}
	report := func(r *bufio.Reader, format string, args ...any) {
		t.Helper()
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("helper said %q: %v", line, err)
		}
		if _, err := fmt.Sscanf(strings.TrimSpace(line), format, args...); err != nil {
			t.Fatalf("helper said %q, want %q: %v", line, format, err)
		}
	}

	pad, out := start("pad")
	var taken, newest idgen.ID
	report(out, "helper: padded %d %d", &taken, &newest)
	ahead := time.Until(slowLayout.Decode(newest).Time)
	if err := pad.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	pad.Wait()

	_, out = start("next")
	var next idgen.ID
	report(out, "helper: next %d", &next)
	t.Logf("killed with IDs %d to %d padded, up to %v ahead of the clock; the next process started at ID %d", taken, newest, ahead.Round(time.Millisecond), next)
	if next <= newest {
		t.Fatalf("after the kill, the next process issued %d, not above the newest ID padded %d: the padded IDs would be issued twice", next, newest)
	}
}
