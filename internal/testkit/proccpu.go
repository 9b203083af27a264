package testkit

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// userHZ is the unit of the CPU times in /proc/PID/stat: USER_HZ, 100 on
// every Linux architecture Go runs on.
const userHZ = 100

// ProcessCPU returns the user plus system CPU time that the process pid
// and its descendants have used so far, from /proc (10 ms resolution), so
// that a benchmark can charge a server's CPU to the messages it served:
// PostgreSQL serves each connection from a child process of the one that
// listens.
func ProcessCPU(pid int) (time.Duration, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return 0, err
	}
	parent := map[int]int{}
	cpu := map[int]time.Duration{}
	for _, p := range stats {
		id, ppid, t, err := readStat(p)
		if err != nil {
			if id == pid {
				return 0, err
			}
			continue // a process that ended meanwhile
		}
		parent[id], cpu[id] = ppid, t
	}
	if _, ok := cpu[pid]; !ok {
		return 0, fmt.Errorf("no process %d", pid)
	}
	var total time.Duration
	for id, t := range cpu {
		for p := id; p > 1; p = parent[p] {
			if p == pid {
				total += t
				break
			}
		}
	}
	return total, nil
}

// readStat reads a /proc/PID/stat file: the process's id, its parent's,
// and its user plus system CPU time, those of its children that it waited
// for included.
func readStat(path string) (pid, ppid int, cpu time.Duration, err error) {
	pid, _ = strconv.Atoi(strings.Split(path, "/")[2])
	b, err := os.ReadFile(path)
	if err != nil {
		return pid, 0, 0, err
	}
	// The command name in parentheses may hold spaces; the fields after it
	// start at state (field 3): ppid (4) is 1, utime to cstime (14–17)
	// are 11 to 14.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return pid, 0, 0, fmt.Errorf("%s: unexpected format", path)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return pid, 0, 0, fmt.Errorf("%s: unexpected format", path)
	}
	if ppid, err = strconv.Atoi(f[1]); err != nil {
		return pid, 0, 0, fmt.Errorf("%s: %w", path, err)
	}
	var ticks int64
	for _, s := range f[11:15] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return pid, 0, 0, fmt.Errorf("%s: %w", path, err)
		}
		ticks += n
	}
	return pid, ppid, time.Duration(ticks) * time.Second / userHZ, nil
}

// ListenerPID returns the process that listens on the TCP address addr
// ("host:port" as the IDEMQ_* variables give it), found through the
// socket's inode in /proc/net/tcp{,6} and /proc/*/fd. Reading other
// processes' descriptors takes their user or root.
func ListenerPID(addr string) (int, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("port of %q: %w", addr, err)
	}
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fs := strings.Fields(sc.Text())
			if len(fs) < 10 || fs[3] != "0A" { // 0A: LISTEN
				continue
			}
			_, hexPort, _ := strings.Cut(fs[1], ":")
			if n, err := strconv.ParseUint(hexPort, 16, 16); err == nil && n == port {
				inodes["socket:["+fs[9]+"]"] = true
			}
		}
		f.Close()
	}
	if len(inodes) == 0 {
		return 0, fmt.Errorf("no process listens on %s", addr)
	}
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && inodes[target] {
			return strconv.Atoi(strings.Split(fd, "/")[2])
		}
	}
	return 0, fmt.Errorf("the process listening on %s is not visible in /proc (run as its user or root)", addr)
}

// ServerCPU returns a function that returns the CPU time the server
// listening at addr (and its descendants: PostgreSQL's backends) has used
// so far, or nil without a server (addr "", as SQLite's) or without access
// to its processes, which it logs.
func ServerCPU(tb testing.TB, addr string) func() time.Duration {
	if addr == "" {
		return nil
	}
	pid, err := ListenerPID(addr)
	if err != nil {
		tb.Logf("server CPU not measured: %v", err)
		return nil
	}
	return func() time.Duration {
		t, err := ProcessCPU(pid)
		if err != nil {
			tb.Fatalf("server CPU: %v", err)
		}
		return t
	}
}
