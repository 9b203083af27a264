package segmenttest

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen/segment"
)

// childEnv marks a run of a test binary as a child of [RunProcesses];
// every setting it passes a child starts with envPrefix.
const (
	childEnv  = "IDEMQ_SEGMENT_CHILD"
	envPrefix = "SEGMENT_"
)

// Processes configures [RunProcesses].
type Processes struct {
	// Procs is the number of processes. Default 8.
	Procs int
	// IDs is the number of IDs each process takes. Default 20000.
	IDs int
	// MaxStep bounds each allocator's adaptive step, so that with a small
	// stored step the processes switch segments often. Default 64.
	MaxStep int64
	// Env holds the backend settings a child's source is built from,
	// which [Child]'s newSource reads by key.
	Env map[string]string
}

// ProcessReport is what [RunProcesses] found.
type ProcessReport struct {
	// IDs is the number of IDs the processes wrote, Distinct the number
	// of distinct ones among them.
	IDs, Distinct int
	// PerProcess is the number of IDs each process wrote, Segments the
	// number of segments each one's allocator loaded.
	PerProcess, Segments []int64
	// Min and Max are the least and greatest ID written.
	Min, Max int64
}

// IsChild reports whether this process is a child of [RunProcesses]. A
// backend's test package calls [Child] from an init function when it is:
//
//	func init() {
//		if segmenttest.IsChild() {
//			os.Exit(segmenttest.Child(newChildSource))
//		}
//	}
func IsChild() bool { return os.Getenv(childEnv) != "" }

// Child is the whole life of a child of [RunProcesses]; its result is the
// exit code. It builds its own source through newSource, from the backend
// settings getenv returns by key (close releases what it opened), opens an
// allocator of the tag with [segment.New], says "ready", waits
// for a line on its standard input, takes its IDs with Next and writes each
// to its file, and says "done <segments loaded>".
func Child(newSource func(getenv func(key string) string) (src segment.Source, close func(), err error)) int {
	getenv := func(k string) string { return os.Getenv(envPrefix + k) }
	if err := child(newSource, getenv); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func child(newSource func(func(string) string) (segment.Source, func(), error), getenv func(string) string) error {
	count, _ := strconv.Atoi(getenv("IDS"))
	maxStep, _ := strconv.ParseInt(getenv("MAX_STEP"), 10, 64)
	src, closeSource, err := newSource(getenv)
	if err != nil {
		return err
	}
	defer closeSource()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	a, err := segment.New(ctx, src, getenv("TAG"), segment.Config{MaxStep: maxStep})
	if err != nil {
		return err
	}
	defer a.Close()
	f, err := os.Create(getenv("OUT"))
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for the start: %w", err)
	}
	var b [8]byte
	for range count {
		id, err := a.Next(ctx)
		if err != nil {
			return err
		}
		binary.LittleEndian.PutUint64(b[:], uint64(id))
		if _, err := w.Write(b[:]); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Printf("done %d\n", a.Stats().Segments)
	return nil
}

// RunProcesses runs p.Procs processes of this test binary (children that
// call [Child]) which all take IDs of tag, each through an allocator over a
// source of its own, started together; it waits for them and reads back
// every ID they wrote. The caller checks the report: the tag must exist,
// with a small step.
func RunProcesses(t *testing.T, tag string, p Processes) ProcessReport {
	t.Helper()
	if p.Procs <= 0 {
		p.Procs = 8
	}
	if p.IDs <= 0 {
		p.IDs = 20000
	}
	if p.MaxStep <= 0 {
		p.MaxStep = 64
	}
	dir := t.TempDir()
	type proc struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   *bufio.Scanner
		file  string
	}
	procs := make([]proc, p.Procs)
	for i := range procs {
		file := filepath.Join(dir, fmt.Sprintf("ids-%02d", i))
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=1",
			envPrefix+"TAG="+tag, envPrefix+"IDS="+strconv.Itoa(p.IDs),
			envPrefix+"MAX_STEP="+strconv.FormatInt(p.MaxStep, 10), envPrefix+"OUT="+file)
		for k, v := range p.Env {
			cmd.Env = append(cmd.Env, envPrefix+k+"="+v)
		}
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		procs[i] = proc{cmd, stdin, bufio.NewScanner(stdout), file}
	}
	line := func(i int) string {
		if !procs[i].out.Scan() {
			return ""
		}
		return procs[i].out.Text()
	}
	for i := range procs {
		if l := line(i); l != "ready" {
			t.Fatalf("process %d said %q, want ready (its stderr is above)", i, l)
		}
	}
	for i := range procs {
		if _, err := io.WriteString(procs[i].stdin, "go\n"); err != nil {
			t.Fatal(err)
		}
	}
	var r ProcessReport
	for i := range procs {
		l := line(i)
		segs, ok := strings.CutPrefix(l, "done ")
		n, err := strconv.ParseInt(segs, 10, 64)
		if !ok || err != nil {
			t.Fatalf("process %d said %q, want done (its stderr is above)", i, l)
		}
		if err := procs[i].cmd.Wait(); err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
		r.Segments = append(r.Segments, n)
	}
	var all []int64
	for i := range procs {
		data, err := os.ReadFile(procs[i].file)
		if err != nil {
			t.Fatal(err)
		}
		if len(data)%8 != 0 {
			t.Fatalf("process %d wrote %d bytes, not whole IDs", i, len(data))
		}
		for b := data; len(b) > 0; b = b[8:] {
			all = append(all, int64(binary.LittleEndian.Uint64(b)))
		}
		r.PerProcess = append(r.PerProcess, int64(len(data)/8))
	}
	if len(all) == 0 {
		t.Fatal("the processes wrote no IDs")
	}
	slices.Sort(all)
	r.IDs, r.Min, r.Max = len(all), all[0], all[len(all)-1]
	r.Distinct = len(slices.Compact(all))
	return r
}
