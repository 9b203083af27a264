package fleettest

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/idemq/idemq/idgen"
)

// childEnv marks a run of a test binary as a fleet child.
const childEnv = "IDEMQ_FLEET_CHILD"

// envPrefix starts the name of every setting passed to a child.
const envPrefix = "FLEET_"

// Exit codes of a child.
const (
	ExitOK     = 0
	ExitFailed = 1
	// ExitNoNode is a child's exit code when it found no free node.
	ExitNoNode = 3
)

// Pool is the pool of node ids a fleet leases from.
type Pool struct {
	Name  string
	Size  int64
	Lease time.Duration
}

// NewLeaser builds a child's leaser of pool p from the backend settings the
// parent passed ([New]'s env), which getenv returns by key. close releases
// whatever it opened.
type NewLeaser func(p Pool, getenv func(key string) string) (l idgen.Leaser, close func(), err error)

// IsChild reports whether this process is a fleet child.
func IsChild() bool { return os.Getenv(childEnv) != "" }

// Child is the whole life of a fleet child; its result is the exit code.
// It leases a node through newLeaser and issues IDs: the count it was
// started with, or, with 0, about 64 per millisecond until its standard
// input closes. It prints "node N" once it holds a node, "fenced" the first
// time the generator refuses to issue because its lease is not live, and
// "done" after a clean close.
func Child(newLeaser NewLeaser) int {
	getenv := func(k string) string { return os.Getenv(envPrefix + k) }
	size, _ := strconv.ParseInt(getenv("SIZE"), 10, 64)
	lease, _ := time.ParseDuration(getenv("LEASE"))
	count, _ := strconv.Atoi(getenv("COUNT"))
	leaser, closeLeaser, err := newLeaser(Pool{Name: getenv("POOL"), Size: size, Lease: lease}, getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return ExitFailed
	}
	defer closeLeaser()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	gen, err := idgen.NewLeased(ctx, leaser, idgen.Config{Rollback: idgen.Wait{Max: time.Minute}},
		idgen.LeaseConfig{Wait: getenv("WAIT") == "1", Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if errors.Is(err, idgen.ErrNoFreeNode) {
		fmt.Fprintln(os.Stderr, err)
		return ExitNoNode
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return ExitFailed
	}
	fmt.Printf("node %d\n", gen.Node())
	f, err := os.Create(getenv("OUT"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return ExitFailed
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
			return ExitFailed
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
		return ExitFailed
	}
	f.Close()
	if err := gen.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return ExitFailed
	}
	fmt.Println("done")
	return ExitOK
}
