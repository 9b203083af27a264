package fleettest

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/internal/racechild"
)

// The roles of fleet children.
const (
	roleLeased   = "fleet-leased"
	roleSegments = "fleet-segments"
)

// Pool is the pool of node ids a fleet leases from.
type Pool struct {
	Name  string
	Size  int64
	Lease time.Duration
}

// NewLeaser builds a child's leaser of pool p from the backend settings the
// parent passed ([New]'s env). close releases whatever it opened.
type NewLeaser func(p Pool, env map[string]string) (l idgen.Leaser, close func(), err error)

// Roles are the roles a backend's test binary runs as a fleet child, for
// racechild.Main: a leased generator over newLeaser's leaser ([Fleet]) and
// a segment allocator over newSource's source ([SegmentProcesses]).
func Roles(newLeaser NewLeaser, newSource NewSource) map[string]func() error {
	return map[string]func() error{
		roleLeased:   func() error { return leased(newLeaser) },
		roleSegments: func() error { return segments(newSource) },
	}
}

// leasedSettings is what a leased child is started with.
type leasedSettings struct {
	Pool Pool
	// Count is the number of IDs to issue; 0, until stopped.
	Count int
	// Wait has the child wait for a free node.
	Wait bool
	// Out is the file the IDs are written to.
	Out string
	Env map[string]string
}

// leased is the whole life of a leased child. It leases a node through
// newLeaser and issues IDs: the count it was started with, or, with 0,
// about 64 per millisecond until stopped. It says "node N" once it holds a
// node ("no free node" if there is none; "lost at start" if, not waiting,
// it stalled past the lease it was granted before renewing it), "fenced"
// the first time the generator refuses to issue because its lease is not
// live, and "done" after a clean close.
func leased(newLeaser NewLeaser) error {
	var s leasedSettings
	if err := racechild.Settings(&s); err != nil {
		return err
	}
	leaser, closeLeaser, err := newLeaser(s.Pool, s.Env)
	if err != nil {
		return err
	}
	defer closeLeaser()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	gen, err := idgen.NewLeased(ctx, leaser, idgen.Config{Rollback: idgen.Wait{Max: time.Minute}},
		idgen.LeaseConfig{Wait: s.Wait, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if errors.Is(err, idgen.ErrNoFreeNode) {
		racechild.Say("no free node")
		return nil
	}
	if errors.Is(err, idgen.ErrLeaseLost) {
		racechild.Say("lost at start")
		return nil
	}
	if err != nil {
		return err
	}
	racechild.Say("node %d", gen.Node())
	f, err := os.Create(s.Out)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<16)
	var stop <-chan struct{}
	if s.Count == 0 {
		stop = racechild.Stopped()
	}
	ids := make([]idgen.ID, 64)
	var buf [8]byte
	fenced := false
	flushed := time.Now()
	for issued := 0; s.Count == 0 || issued < s.Count; {
		n := len(ids)
		if s.Count > 0 {
			n = min(n, s.Count-issued)
		}
		n, err = gen.Fill(ctx, ids[:n])
		for _, id := range ids[:n] {
			binary.LittleEndian.PutUint64(buf[:], uint64(id))
			w.Write(buf[:])
		}
		issued += n
		if errors.Is(err, idgen.ErrLeaseLost) && !fenced {
			fenced = true
			racechild.Say("fenced")
		} else if err != nil && !errors.Is(err, idgen.ErrLeaseLost) {
			return err
		}
		if s.Count > 0 {
			continue
		}
		if time.Since(flushed) > 5*time.Millisecond {
			w.Flush()
			flushed = time.Now()
		}
		select {
		case <-stop:
			s.Count = -1 // leave the loop
		case <-time.After(time.Millisecond):
		}
		if s.Count < 0 {
			break
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	f.Close()
	if err := gen.Close(); err != nil {
		return err
	}
	racechild.Say("done")
	return nil
}
