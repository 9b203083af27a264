//go:build linux

package testkit

import (
	"net"
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestListenerPIDAndProcessCPU(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pid, err := ListenerPID(ln.Addr().String())
	if err != nil || pid != os.Getpid() {
		t.Fatalf("ListenerPID = %d, %v; want %d", pid, err, os.Getpid())
	}
	before, err := ProcessCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	// Spin until a tick of CPU time shows, however busy the machine.
	after := before
	for start := time.Now(); after <= before; {
		for spin := time.Now(); time.Since(spin) < 10*time.Millisecond; {
		}
		if after, err = ProcessCPU(pid); err != nil {
			t.Fatal(err)
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("ProcessCPU still %v after a minute of spinning", after)
		}
	}
	// A child's CPU time counts too, while it runs and after it ended.
	child := exec.Command("sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done")
	if err := child.Run(); err != nil {
		t.Fatal(err)
	}
	withChild, err := ProcessCPU(pid)
	// /proc counts whole ticks of 10 ms where the child's own account does not.
	childCPU := child.ProcessState.UserTime() + child.ProcessState.SystemTime()
	if err != nil || withChild-after < childCPU-20*time.Millisecond {
		t.Errorf("ProcessCPU after a child's loop of %v: %v then %v, %v", childCPU, after, withChild, err)
	}
	ln.Close()
	if _, err := ListenerPID(ln.Addr().String()); err == nil {
		t.Fatal("ListenerPID found a closed listener")
	}
}
