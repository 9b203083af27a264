package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDocsMatchResults redraws the committed charts from the committed
// bench/RESULTS.md: a chart that differs from its table fails here.
// `go run ./cmd/benchtable -redraw` in bench/ redraws them.
func TestDocsMatchResults(t *testing.T) {
	const docs = "../../../docs"
	results, err := os.ReadFile("../../RESULTS.md")
	if err != nil {
		t.Fatal(err)
	}
	perf, err := os.ReadFile(filepath.Join(docs, "performance.md"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := docFiles(string(results), string(perf))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(charts)+1 {
		t.Fatalf("%d files, want the %d charts and performance.md", len(files), len(charts))
	}
	for _, f := range files {
		committed, err := os.ReadFile(filepath.Join(docs, f.name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(committed, f.content) {
			t.Errorf("docs/%s is not what bench/RESULTS.md draws; run `go run ./cmd/benchtable -redraw` in bench/", f.name)
		}
	}
	// Every chart shows bars, and the one of the CPU time the store's
	// server's and the broker's too.
	for _, f := range files[:len(charts)] {
		if !bytes.Contains(f.content, []byte(`height="16"`)) {
			t.Errorf("%s has no bar", f.name)
		}
	}
	for _, f := range files {
		if f.name == "perf-cpu.svg" && (!bytes.Contains(f.content, []byte(" MariaDB")) || !bytes.Contains(f.content, []byte(" broker</text>"))) {
			t.Errorf("%s lacks the database's or the broker's CPU", f.name)
		}
	}
}

// TestReadShown reads back what render wrote.
func TestReadShown(t *testing.T) {
	res, err := parse(strings.NewReader(input))
	if err != nil {
		t.Fatal(err)
	}
	s, err := readShown(render(res, "idemq"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.env, "goos: linux, goarch: amd64, cpu: AMD EPYC, go") || strings.HasSuffix(s.env, ".") {
		t.Errorf("env %q", s.env)
	}
	for _, tc := range []struct {
		table, row, cost, perSec string
		other                    map[string]string
	}{
		{"github.com/idemq/idemq/bench Wide", "idemq", "37", "27.03M", map[string]string{}},
		{"github.com/idemq/idemq/dedupe/sqldedupe Plain", "BenchmarkPlain", "1000", "1.00M", map[string]string{}},
		{"github.com/idemq/idemq/remoting EndToEnd/Redis", "idemq", "50000", "20.00k", map[string]string{"cpu-µs/msg": "12.5"}},
		{"github.com/idemq/idemq/remoting EndToEnd/Redis", "naive", "25000", "40.00k", map[string]string{"cpu-µs/msg": "9.50"}},
		{"github.com/idemq/idemq/idgen Segment", "idemq", "4", "250.00M", map[string]string{"IDs/s": "250.00M", "calls/segment": "1"}},
	} {
		r, ok := s.row(tc.table, tc.row)
		if !ok {
			t.Errorf("no row %s in %s", tc.row, tc.table)
			continue
		}
		if r.cost != tc.cost || r.perSec != tc.perSec || len(r.other) != len(tc.other) {
			t.Errorf("%s %s: %+v, want %s, %s, %v", tc.table, tc.row, r, tc.cost, tc.perSec, tc.other)
		}
		for unit, v := range tc.other {
			if r.other[unit] != v {
				t.Errorf("%s %s: %s %q, want %q", tc.table, tc.row, unit, r.other[unit], v)
			}
		}
	}
	if _, err := readShown("# Benchmark results\n\nno tables\n"); err == nil {
		t.Error("no error for results without a table")
	}
}

func TestParseShown(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
	}{
		{"36.41k", 36410},
		{"250.00M", 250e6},
		{"1.50G", 1.5e9},
		{"9.50", 9.5},
		{"27469", 27469},
	} {
		got, err := parseShown(tc.in)
		if err != nil || got < tc.want*(1-1e-12) || got > tc.want*(1+1e-12) {
			t.Errorf("parseShown(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "-", "k", "1.2x"} {
		if _, err := parseShown(bad); err == nil {
			t.Errorf("parseShown(%q): no error", bad)
		}
	}
}

func TestCPUPerMessage(t *testing.T) {
	redis := sectionSpec{server: "Redis", serverUnit: "redis-µs/msg"}
	for _, tc := range []struct {
		name  string
		other map[string]string
		s     sectionSpec
		ok    bool
		parts []float64
		value string
	}{
		{"every process", map[string]string{"cpu-µs/msg": "28", "redis-µs/msg": "9.50", "broker-µs/msg": "6.50", "tax-%": "80"}, redis,
			true, []float64{28, 9.5, 6.5}, "44 µs = 28 consumer + 9.50 Redis + 6.50 broker"},
		{"before the broker was measured", map[string]string{"cpu-µs/msg": "28", "redis-µs/msg": "9.50"}, redis,
			true, []float64{28, 9.5, 0}, "37.5 µs = 28 consumer + 9.50 Redis"},
		{"a store in the consumer's process", map[string]string{"cpu-µs/msg": "99", "broker-µs/msg": "12"}, sectionSpec{},
			true, []float64{99, 0, 12}, "111 µs = 99 consumer + 12 broker"},
		{"the consumer alone", map[string]string{"cpu-µs/msg": "99"}, sectionSpec{},
			true, []float64{99, 0, 0}, "99 µs"},
		{"no CPU measured", map[string]string{"tax-%": "80"}, redis, false, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, ok, err := cpuPerMessage(shownRow{other: tc.other}, tc.s)
			if err != nil || ok != tc.ok {
				t.Fatalf("ok %v, %v; want %v", ok, err, tc.ok)
			}
			if !ok {
				return
			}
			if b.value != tc.value || len(b.parts) != len(tc.parts) {
				t.Fatalf("%v %q, want %v %q", b.parts, b.value, tc.parts, tc.value)
			}
			for i := range b.parts {
				if b.parts[i] != tc.parts[i] {
					t.Errorf("parts %v, want %v", b.parts, tc.parts)
				}
			}
		})
	}
	if _, _, err := cpuPerMessage(shownRow{other: map[string]string{"cpu-µs/msg": "x"}}, redis); err == nil {
		t.Error("no error for a figure that is not a number")
	}
}

func TestSplice(t *testing.T) {
	doc := "# Title\n\nprose\n\n" + beginMark + "\nold charts\n" + endMark + "\n\nmore prose\n"
	got, err := splice(doc, "new charts\n")
	want := "# Title\n\nprose\n\n" + beginMark + "\nnew charts\n" + endMark + "\n\nmore prose\n"
	if err != nil || got != want {
		t.Errorf("splice = %q, %v; want %q", got, err, want)
	}
	if again, _ := splice(got, "new charts\n"); again != got {
		t.Errorf("splicing twice changed the doc: %q", again)
	}
	for _, bad := range []string{"no marks", beginMark + "\nonly the first", endMark + "\n" + beginMark} {
		if _, err := splice(bad, "x"); err == nil {
			t.Errorf("no error for %q", bad)
		}
	}
}

// TestAside: Kafka's row without dedupe is given in its section's title,
// not drawn, on the throughput chart; NATS's is drawn.
func TestAside(t *testing.T) {
	res, err := parse(strings.NewReader("pkg: github.com/idemq/idemq/bench\n" +
		"BenchmarkKafkaEndToEnd/Redis/idemq-2 1 25000 ns/op 40000 msgs/s 500 dedupe-off-ns/op 2000000 dedupe-off-msgs/s 33333 naive-ns/op 30000 naive-msgs/s\n" +
		"BenchmarkNATSEndToEnd/Redis/idemq-2 1 40000 ns/op 25000 msgs/s 5000 dedupe-off-ns/op 200000 dedupe-off-msgs/s 50000 naive-ns/op 20000 naive-msgs/s\n"))
	if err != nil {
		t.Fatal(err)
	}
	shown, err := readShown(render(res, "idemq"))
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(charts, func(c chartSpec) bool { return c.file == "perf-brokers.svg" })
	c, err := charts[i].draw(shown)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.sections) != 2 {
		t.Fatalf("%d sections, want Kafka's and NATS's", len(c.sections))
	}
	for _, tc := range []struct {
		title string
		bars  []string
	}{
		{"Kafka, one message per store round trip (a goroutine per partition); none (dedupe off): 2.00M msgs/s, off the scale",
			[]string{"idemq", "naive SET NX + SET"}},
		{"NATS JetStream, one message per store round trip (20 goroutines)",
			[]string{"none (dedupe off)", "idemq", "naive SET NX + SET"}},
	} {
		j := slices.IndexFunc(c.sections, func(s section) bool { return s.title == tc.title })
		if j < 0 {
			t.Errorf("no section %q in %+v", tc.title, c.sections)
			continue
		}
		var bars []string
		for _, b := range c.sections[j].bars {
			bars = append(bars, b.label)
		}
		if !slices.Equal(bars, tc.bars) {
			t.Errorf("%s: bars %q, want %q", tc.title, bars, tc.bars)
		}
	}
}
