package grpcproducer_test

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/idemq/idemq/internal/testenv"
)

// The gRPC client (rocketmq-clients/golang/v5 v5.1.4) races with itself:
// its telemetry goroutine applies the settings the proxy pushes (retry
// policy, metrics switch) while its settings sync marshals the same
// structures, from a second after a client starts. The race detector then
// fails whatever test is running, and no compiler flag helps: many of the
// racing accesses are in protobuf's code, which the client feeds shared
// messages to, and compiling protobuf without the detector loses its own
// synchronization and reports races that are not there.
//
// So the tests that run real clients run in a child process of the test
// binary, with the race detector's reports written to files. The parent
// passes if the child did, or if the child failed only for data races
// each made by the client, protobuf or gRPC code (not ours) on both
// sides; it logs them. An assertion that fails, or a race with our code on
// either side, fails it.

// childEnv makes TestThroughTheProxy run its subtests instead of a child.
const childEnv = "GRPCPRODUCER_TEST_CHILD"

// figure marks a child's log line that the parent repeats: a measurement,
// not a failure.
const figure = "figure: "

// runChild runs test in a child process against the proxy at ep and fails
// t unless the child passed or failed for library races alone.
func runChild(t *testing.T, test string, ep testenv.RocketMQ5Endpoints) {
	t.Helper()
	races := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"=1",
		"IDEMQ_ROCKETMQ5_NAMESRV="+ep.NameServer, "IDEMQ_ROCKETMQ5_PROXY="+ep.Proxy,
		"GORACE=log_path="+filepath.Join(races, "race"))
	out, err := cmd.CombinedOutput()
	for line := range strings.Lines(string(out)) {
		if _, f, ok := strings.Cut(line, figure); ok {
			t.Log(strings.TrimSpace(f))
		}
	}
	reports := raceReports(t, races)
	if err == nil && len(reports) == 0 {
		return
	}
	if failed := assertionFailures(string(out)); err != nil && (len(failed) > 0 || len(reports) == 0) {
		t.Fatalf("child: %v\n%s%s", err, out, strings.Join(reports, "\n"))
	}
	pairs := map[string]int{}
	for _, r := range reports {
		where, ok := libraryRace(r)
		if !ok {
			t.Fatalf("a data race not inside the gRPC client:\n%s", r)
		}
		pairs[where]++
	}
	t.Logf("%d data races inside the gRPC client tolerated (see racechild_test.go):", len(reports))
	for _, where := range slices.Sorted(maps.Keys(pairs)) {
		t.Logf("%d× %s", pairs[where], where)
	}
}

// raceReports returns the race detector's reports written under dir.
func raceReports(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "race*"))
	if err != nil {
		t.Fatal(err)
	}
	var reports []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range strings.Split(string(b), "WARNING: DATA RACE")[1:] {
			r, _, _ = strings.Cut(r, "==================")
			reports = append(reports, strings.TrimSpace(r))
		}
	}
	return reports
}

// logLine is a t.Log or t.Error line in go test -v output.
var logLine = regexp.MustCompile(`^\s+[\w.-]+\.go:\d+: (.*)`)

// assertionFailures returns the child's log lines that are neither figures
// nor the testing package's note of a race, and its panics.
func assertionFailures(out string) []string {
	var failed []string
	for line := range strings.Lines(out) {
		m := logLine.FindStringSubmatch(line)
		switch {
		case strings.HasPrefix(line, "panic:"):
			failed = append(failed, line)
		case m == nil, strings.HasPrefix(m[1], figure), m[1] == "race detected during execution of test":
		default:
			failed = append(failed, line)
		}
	}
	return failed
}

// libraries are where a tolerated race's accesses are made.
var libraries = []string{
	"github.com/apache/rocketmq-clients/golang/v5",
	"google.golang.org/protobuf/",
	"google.golang.org/grpc",
}

// location is a file:line line of a race report's stack.
var location = regexp.MustCompile(`:\d+ \+0x[0-9a-f]+$`)

// libraryRace reports whether both accesses of a race report were made in
// library code: the first function of each access's stack that is not the
// runtime's or package sync's is a library's. It returns those two
// functions.
func libraryRace(report string) (where string, ok bool) {
	var funcs []string
	inAccess, decided := false, false
	for _, l := range strings.Split(report, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.Contains(l, " at 0x"): // "Write at 0x… by goroutine 7:"
			inAccess, decided = true, false
		case l == "" || strings.HasPrefix(l, "Goroutine "):
			inAccess = false
		case !inAccess || decided || location.MatchString(l):
		case strings.HasPrefix(l, "runtime.") || strings.HasPrefix(l, "sync.") || strings.HasPrefix(l, "sync/atomic."):
		case hasAnyPrefix(l, libraries):
			funcs = append(funcs, l)
			decided = true
		default:
			return "", false
		}
	}
	return strings.Join(funcs, " / "), len(funcs) == 2
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// TestRaceTolerance checks the rules runChild decides by.
func TestRaceTolerance(t *testing.T) {
	const library = `Read at 0x00c000128648 by goroutine 39:
  sync/atomic.LoadInt32()
      <autogenerated>:1 +0x14
  google.golang.org/protobuf/internal/impl.sizeInt32NoZero()
      /root/go/pkg/mod/google.golang.org/protobuf@v1.36.6/internal/impl/codec_gen.go:644 +0x47
  github.com/apache/rocketmq-clients/golang/v5.(*defaultClientSession).publish()
      /root/go/pkg/mod/github.com/apache/rocketmq-clients/golang/v5@v5.1.4/client.go:200 +0xc9

Previous write at 0x00c000128648 by goroutine 50:
  github.com/apache/rocketmq-clients/golang/v5.(*producerSettings).applySettingsCommand()
      /root/go/pkg/mod/github.com/apache/rocketmq-clients/golang/v5@v5.1.4/producer_options.go:155 +0x12a

Goroutine 39 (running) created at:
  github.com/idemq/idemq/producer/grpcproducer_test.startProducer()
      /work/main/producer/grpcproducer/proxy_test.go:43 +0x5ca`
	ours := strings.Replace(library,
		"  github.com/apache/rocketmq-clients/golang/v5.(*producerSettings).applySettingsCommand()",
		"  github.com/idemq/idemq/producer/grpcproducer.message.SetProperty()", 1)
	for _, tc := range []struct {
		name   string
		report string
		want   bool
	}{
		{"inside the client", library, true},
		{"one access ours", ours, false},
		{"no stacks", "Read at 0x1 by goroutine 2:\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if where, ok := libraryRace(tc.report); ok != tc.want {
				t.Fatalf("libraryRace = %q, %v; want %v", where, ok, tc.want)
			}
		})
	}

	out := `=== RUN   TestThroughTheProxy/sends
    proxy_test.go:306: figure: the check-back's commit arrived 1.4s after the half message
    testing.go:1712: race detected during execution of test
--- FAIL: TestThroughTheProxy/sends (2.35s)
`
	if f := assertionFailures(out); len(f) > 0 {
		t.Fatalf("assertionFailures found %q in a run that failed for a race alone", f)
	}
	out += "    proxy_test.go:300: received map[commit:2]: want commit once\n"
	if f := assertionFailures(out); len(f) != 1 {
		t.Fatalf("assertionFailures = %q, want the one failed assertion", f)
	}
}
