//go:build unix

package testkit

import (
	"syscall"
	"testing"
	"time"
)

// OwnCPU returns the CPU time, user and system, that this process has used
// so far: a benchmark's cost where wall time stretches with a busy
// machine's load.
func OwnCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
