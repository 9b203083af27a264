//go:build linux

package testkit

import (
	"net"
	"os"
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
	for spin := time.Now(); time.Since(spin) < 50*time.Millisecond; {
	}
	after, err := ProcessCPU(pid)
	if err != nil || after <= before {
		t.Fatalf("ProcessCPU after 50 ms of spinning: %v then %v, %v", before, after, err)
	}
	ln.Close()
	if _, err := ListenerPID(ln.Addr().String()); err == nil {
		t.Fatal("ListenerPID found a closed listener")
	}
}
