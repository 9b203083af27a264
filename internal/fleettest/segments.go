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
// parent passed ([SegmentProcesses]'s env). close releases whatever it opened.
type NewSource func(env map[string]string) (src segment.Store, close func(), err error)

// The processes [SegmentProcesses] runs, the IDs each takes, and the bound
// of each allocator's adaptive step, so that with a small stored step the
// processes switch segments often.
const (
	procs   = 8
	procIDs = 20000
	maxStep = 64
)

// segmentsSettings is what a segments child is started with.
type segmentsSettings struct {
	Tag     string
	IDs     int
	MaxStep int64
	Out     string
	Env     map[string]string
}

// segments is the whole life of a child of [SegmentProcesses]. It builds its
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

// SegmentProcesses creates tag in src, starting at 1,000,000 with a step
// of 10, and runs 8 children that all take 20000 IDs of it, each through an
// allocator over a source of its own built from env, started together. No
// ID may be written twice, and every one must lie between the tag's start
// and its MaxID after.
func SegmentProcesses(t *testing.T, src segment.Store, tag string, env map[string]string) {
	t.Helper()
	const start = 1_000_000
	if err := src.CreateTag(t.Context(), segment.Tag{Tag: tag, MaxID: start, Step: 10}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kids := make([]*racechild.Proc, procs)
	files := make([]string, procs)
	for i := range kids {
		files[i] = filepath.Join(dir, fmt.Sprintf("ids-%02d", i))
		s := segmentsSettings{Tag: tag, IDs: procIDs, MaxStep: maxStep, Out: files[i], Env: env}
		kids[i] = racechild.Start(t, roleSegments, "process "+strconv.Itoa(i), s)
	}
	for _, c := range kids {
		c.Expect(t, "ready", time.Minute)
	}
	for _, c := range kids {
		c.Tell(t, "go")
	}
	var segs, per []int64
	for i, c := range kids {
		said := c.Expect(t, "done ", 5*time.Minute)
		n, err := strconv.ParseInt(said, 10, 64)
		if err != nil {
			t.Fatalf("process %d said done %q", i, said)
		}
		c.Wait(t, time.Minute, nil)
		segs = append(segs, n)
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
		per = append(per, int64(len(data)/8))
	}
	if len(all) == 0 {
		t.Fatal("the processes wrote no IDs")
	}
	got, err := src.Tag(t.Context(), tag)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(all)
	n, lo, hi := len(all), all[0], all[len(all)-1]
	distinct := len(slices.Compact(all))
	t.Logf("%d IDs from %d processes (%v), %d distinct, %d duplicates, in [%d, %d]; segments per process %v; the tag's MaxID is %d",
		n, len(per), per, distinct, n-distinct, lo, hi, segs, got.MaxID)
	if distinct != n {
		t.Fatalf("%d of %d IDs were written twice", n-distinct, n)
	}
	if n != procs*procIDs {
		t.Fatalf("%d IDs written, want %d", n, procs*procIDs)
	}
	if lo < start || hi >= got.MaxID {
		t.Fatalf("IDs in [%d, %d], outside the tag's [%d, %d)", lo, hi, start, got.MaxID)
	}
}
