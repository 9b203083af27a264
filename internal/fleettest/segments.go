package fleettest

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/internal/racechild"
)

// NewSource builds a child's segment source from the backend settings the
// parent passed ([Processes.Env]). close releases whatever it opened.
type NewSource func(env map[string]string) (src segment.Store, close func(), err error)

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
	// which its [NewSource] reads by key.
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

// segmentsSettings is what a segments child is started with.
type segmentsSettings struct {
	Tag     string
	IDs     int
	MaxStep int64
	Out     string
	Env     map[string]string
}

// segments is the whole life of a child of [RunProcesses]. It builds its
// own source through newSource, opens an allocator of the tag with
// [segment.New], says "ready", waits to be told "go", takes its IDs with
// Next and writes each to its file, and says "done <segments loaded>".
func segments(newSource NewSource) error {
	var s segmentsSettings
	if err := racechild.Settings(&s); err != nil {
		return err
	}
	src, closeSource, err := newSource(s.Env)
	if err != nil {
		return err
	}
	defer closeSource()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Eight children load segments of one tag, each load a write that
	// waits its turn (SQLite has one writer); on a loaded machine a turn can
	// take longer than the default 5s. The children check uniqueness, not
	// latency: a load is bounded only by the child's budget.
	a, err := segment.New(ctx, src, s.Tag, segment.Config{MaxStep: s.MaxStep, LoadTimeout: 5 * time.Minute})
	if err != nil {
		return err
	}
	defer a.Close()
	f, err := os.Create(s.Out)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	racechild.Say("ready")
	if l, ok := <-racechild.Told(); !ok || l != "go" {
		return fmt.Errorf("waiting for go: told %q", l)
	}
	var b [8]byte
	for range s.IDs {
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
	racechild.Say("done %d", a.Stats().Segments)
	return nil
}

// RunProcesses runs p.Procs children that all take IDs of tag, each through
// an allocator over a source of its own, started together; it waits for
// them and reads back every ID they wrote. The caller checks the report
// ([CheckProcesses]): the tag must exist, with a small step.
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
	procs := make([]*racechild.Proc, p.Procs)
	files := make([]string, p.Procs)
	for i := range procs {
		files[i] = filepath.Join(dir, fmt.Sprintf("ids-%02d", i))
		s := segmentsSettings{Tag: tag, IDs: p.IDs, MaxStep: p.MaxStep, Out: files[i], Env: p.Env}
		procs[i] = racechild.Start(t, roleSegments, "process "+strconv.Itoa(i), s)
	}
	for _, c := range procs {
		c.Expect(t, "ready", time.Minute)
	}
	for _, c := range procs {
		c.Tell(t, "go")
	}
	var r ProcessReport
	for i, c := range procs {
		segs := c.Expect(t, "done ", 5*time.Minute)
		n, err := strconv.ParseInt(segs, 10, 64)
		if err != nil {
			t.Fatalf("process %d said done %q", i, segs)
		}
		c.Wait(t, time.Minute, nil)
		r.Segments = append(r.Segments, n)
	}
	var all []int64
	for i, file := range files {
		data, err := os.ReadFile(file)
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

// CheckProcesses logs r and fails t unless the processes wrote their
// IDs, 8 x 20000 of them, each once, all within [start, end).
func CheckProcesses(t *testing.T, r ProcessReport, start, end int64) {
	t.Helper()
	t.Logf("%d IDs from %d processes (%v), %d distinct, %d duplicates, in [%d, %d]; segments per process %v; the tag's MaxID is %d",
		r.IDs, len(r.PerProcess), r.PerProcess, r.Distinct, r.IDs-r.Distinct, r.Min, r.Max, r.Segments, end)
	if r.Distinct != r.IDs {
		t.Fatalf("%d of %d IDs were written twice", r.IDs-r.Distinct, r.IDs)
	}
	if r.IDs != 8*20000 {
		t.Fatalf("%d IDs written, want %d", r.IDs, 8*20000)
	}
	if r.Min < start || r.Max >= end {
		t.Fatalf("IDs in [%d, %d], outside the tag's [%d, %d)", r.Min, r.Max, start, end)
	}
}
