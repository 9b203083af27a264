// Package racechild runs parts of a test in child processes of the test
// binary and judges each child by one rule: it fails on any data race that
// touches our code, and passes races wholly inside the libraries it names.
//
// A child runs either a test ([Test]) or a role of its own ([Start], which
// [Main] dispatches from TestMain). A role reads its settings ([Settings]),
// tells its parent lines ([Say]) that the parent reads with deadlines
// ([Proc.Next], [Proc.Expect]), hears lines from it ([Told]) and stops when
// the parent closes its standard input ([Stopped], [Proc.Stop]); the parent
// can also kill, pause and resume it ([Proc.Kill], [Proc.Pause],
// [Proc.Resume]) and judges its exit ([Proc.Wait]).
//
// Races are tolerated for the RocketMQ clients' sake. The gRPC client
// (github.com/apache/rocketmq-clients/golang/v5 v5.1.4)
// races with itself: its telemetry goroutine applies the settings the proxy
// pushes (retry policy, metrics switch) while its requests read them and its
// settings sync marshals the same structures, from a second after a client
// starts. The race detector then fails whatever test is running, and no
// compiler flag helps: many racing accesses are in protobuf's code, which
// the client feeds shared messages to, and compiling protobuf without the
// detector loses its own synchronization and reports races that are not
// there. The remoting client (rocketmq-client-go) races with itself too:
// its Shutdown sets its closed flag unsynchronised while a rebalance's
// InvokeSync reads it (apache/rocketmq-client-go#1115, unmerged), so every
// test that starts and shuts one down runs in a child.
//
// [CheckExit] takes the libraries whose own races it tolerates.
//
// # The rule
//
// A child passes when nothing but data races failed it, and each of its
// races is within the tolerated libraries ([Race.Within]): both accesses
// made by their code. Those are [Libraries] for a child that runs a test,
// and what [Proc.Wait] is given for a role. "Nothing but data races" is,
// for a child that runs a test ([Test]), an exit code of 0, or 1 with no failure in its output but the testing package's "race
// detected during execution of test"; for a child that runs a role
// ([CheckExit]), an exit code of 0, or [ExitRace], which the race runtime
// gives a process that exits 0 after a race. A panic, a crash, a failed
// assertion, or an exit blamed on races with no race reported fails the
// parent; so does a single race not tolerated.
//
// The package is test support: import it from _test.go files and other
// test support only, so that no user of idemq links it.
package racechild

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// Figure marks a child's log line that [Test] repeats in the parent: a
// measurement, not a failure. A child test logs nothing else; a log line
// without it counts as a failure.
const Figure = "figure: "

// ExitRace is the exit code the race runtime gives a process that exits 0
// after it found a data race (GORACE exitcode, default 66).
const ExitRace = 66

// childEnv, set, makes [Test] run its caller's scenario instead of a child.
const childEnv = "IDEMQ_RACECHILD"

// Libraries are the import path prefixes of the code whose races with
// itself are tolerated: the 5.x client, protobuf, gRPC, the remoting
// client and the tree map under its orderly process queue, which it reads
// unlocked (processQueue.takeMessages calls msgCache.Empty outside
// pq.mutex) while a pull puts messages in.
var Libraries = []string{
	"github.com/apache/rocketmq-clients/golang/v5",
	"google.golang.org/protobuf/",
	"google.golang.org/grpc",
	"github.com/apache/rocketmq-client-go/v2/",
	"github.com/emirpasic/gods/",
}

// transparent are the function prefixes passed over when looking for the
// code that made an access: the runtime's and package sync's, which make
// accesses on their callers' behalf.
var transparent = []string{"runtime.", "internal/runtime/", "internal/race.", "sync.", "sync/atomic.", "internal/sync."}

// Race is one report of the race detector.
type Race struct {
	// Report is the report's text, between the "WARNING: DATA RACE" line
	// and the closing line of equals signs.
	Report string
	// Accessors are, for each of the report's accesses in order, the
	// function that made it: the first function of its stack outside the
	// runtime and package sync, which make accesses on their callers'
	// behalf. Empty if a stack could not be read.
	Accessors []string
}

// Within reports whether both of r's accesses were made by the code of
// libraries, import path prefixes such as [Libraries]. That code may have
// been called by ours; what it races on is then its own. (A library that
// races on a value because our code shared it wrongly would pass too: the
// rule trusts the accessors.)
func (r Race) Within(libraries []string) bool {
	if len(r.Accessors) != 2 {
		return false
	}
	for _, f := range r.Accessors {
		if !hasAnyPrefix(f, libraries) {
			return false
		}
	}
	return true
}

// Parse returns the race reports in log, the race detector's output (a
// process's standard error, or the files of GORACE log_path) mixed with
// anything else.
func Parse(log string) []Race {
	var races []Race
	for _, r := range strings.Split(log, "WARNING: DATA RACE")[1:] {
		r, _, _ = strings.Cut(r, "==================")
		r = strings.TrimSpace(r)
		races = append(races, Race{Report: r, Accessors: accessors(r)})
	}
	return races
}

// accessors returns the function that made each access of report, or nil
// if a stack is malformed. An access is a line "Read at 0x… by goroutine
// 7:" followed by its stack, two lines a frame — the function, then its
// file:line, which may be "<autogenerated>:1 +0x50" or a path without a
// leading slash (-trimpath) — until a blank line.
func accessors(report string) []string {
	var out []string
	frame, inAccess, found := 0, false, false
	for _, l := range strings.Split(report, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.Contains(l, " at 0x") && strings.HasSuffix(l, ":"):
			if inAccess && !found {
				return nil
			}
			frame, inAccess, found = 0, true, false
		case !inAccess:
		case l == "":
			if !found {
				return nil
			}
			inAccess = false
		case frame%2 == 1: // a file:line
			frame++
			if !fileLine.MatchString(l) {
				return nil
			}
		default: // a function
			frame++
			if !strings.HasSuffix(l, ")") {
				return nil
			}
			if !found && !hasAnyPrefix(l, transparent) {
				out, found = append(out, l), true
			}
		}
	}
	if inAccess && !found {
		return nil
	}
	return out
}

// fileLine is a frame's location line.
var fileLine = regexp.MustCompile(`:\d+( \+0x[0-9a-f]+)?$`)

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// Test runs the test t in a child process of the test binary, with env
// (NAME=value pairs, such as the servers' addresses) added to its
// environment, unless this process is that child; it reports whether it
// is. The parent repeats the child's [Figure] lines and fails t by the
// package's rule. Use it as a test's first statement:
//
//	if !racechild.Test(t, "IDEMQ_REDIS_ADDR="+testenv.Redis(t)) {
//		return
//	}
func Test(t *testing.T, env ...string) bool {
	t.Helper()
	if os.Getenv(childEnv) != "" {
		return true
	}
	races := t.TempDir()
	args := []string{"-test.run=" + runPattern(t.Name()), "-test.v", "-test.count=1"}
	if d, ok := t.Deadline(); ok {
		// A child that hangs panics with its goroutines before the parent's
		// own timeout ends them both without them.
		args = append(args, fmt.Sprintf("-test.timeout=%v", time.Until(d)*9/10))
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), env...), childEnv+"=1",
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" log_path="+filepath.Join(races, "race")))
	out, err := cmd.CombinedOutput()
	// Not a range over strings.Lines: its loop body is a function, which
	// t.Helper does not mark, and the figures would be logged as this file's.
	for _, line := range strings.Split(string(out), "\n") {
		if _, f, ok := strings.Cut(line, Figure); ok {
			t.Log(strings.TrimSpace(f))
		}
	}
	log, rerr := readLogs(races)
	if rerr != nil {
		t.Fatal(rerr)
	}
	found := Parse(log)
	code := cmd.ProcessState.ExitCode()
	if code != 0 {
		failed := failures(string(out))
		if code != 1 || len(failed) > 0 || len(found) == 0 {
			t.Fatalf("child %s: %v, failures %q\n%s%s", t.Name(), err, failed, out, log)
		}
	}
	judge(t, "child "+t.Name(), found, Libraries)
	return false
}

// runPattern is a -test.run pattern that matches the test named name (as
// testing.T.Name gives it) alone.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// readLogs returns the contents of the race detector's log files in dir.
func readLogs(dir string) (string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "race*"))
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		b.Write(data)
	}
	return b.String(), nil
}

// logLine is a t.Log or t.Error line in go test -v output.
var logLine = regexp.MustCompile(`^\s+[\w.-]+\.go:\d+: (.*)`)

// raceNote is what the testing package logs in a test during which the
// race detector reported a race.
const raceNote = "race detected during execution of test"

// failures returns the lines of a child test's output that report a
// failure other than a data race: its log lines that are neither a
// [Figure] nor [raceNote], and its panics.
func failures(out string) []string {
	var failed []string
	for line := range strings.Lines(out) {
		m := logLine.FindStringSubmatch(line)
		switch {
		case strings.HasPrefix(line, "panic:"), strings.HasPrefix(line, "fatal error:"):
			failed = append(failed, strings.TrimSpace(line))
		case m == nil, strings.HasPrefix(m[1], Figure), m[1] == raceNote:
		default:
			failed = append(failed, strings.TrimSpace(line))
		}
	}
	return failed
}

// CheckExit fails tb unless the child process called name, which ran a
// role of its own (not a test), passed by the package's rule: it exited 0,
// or [ExitRace] for races found in stderr, its standard error, that are
// all tolerated.
func CheckExit(tb testing.TB, name string, code int, stderr string, libraries []string) {
	tb.Helper()
	found := Parse(stderr)
	switch {
	case code == ExitRace && len(found) == 0:
		tb.Errorf("%s exited %d, the race detector's code, with no race report in its standard error:\n%s", name, code, lastLines(stderr, 60))
	case code != 0 && code != ExitRace:
		tb.Errorf("%s exited %d:\n%s", name, code, lastLines(stderr, 60))
	default:
		judge(tb, name, found, libraries)
	}
}

// judge fails tb for the first race of races not tolerated, or logs how
// many were and where.
func judge(tb testing.TB, name string, races []Race, libraries []string) {
	tb.Helper()
	if len(races) == 0 {
		return
	}
	pairs := map[string]int{}
	for _, r := range races {
		if !r.Within(libraries) {
			tb.Errorf("%s: a data race not inside %s:\n%s", name, strings.Join(libraries, ", "), r.Report)
			return
		}
		pairs[strings.Join(r.Accessors, " / ")]++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d data races inside %s tolerated (internal/racechild):", name, len(races), strings.Join(libraries, ", "))
	for _, where := range slices.Sorted(maps.Keys(pairs)) {
		fmt.Fprintf(&b, "\n  %d× %s", pairs[where], where)
	}
	tb.Log(b.String())
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
