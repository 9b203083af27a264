// Command benchtable reads `go test -bench` output on stdin and prints a
// markdown table per benchmark group: ns/op, operations (IDs) per second,
// B/op, allocs/op, and for each of our rows the ratio of its ns/op to each
// peer's in the same group. It writes the same text to RESULTS.md.
//
//	go test -run '^$' -bench . -benchmem ./... | go run ./cmd/benchtable
//
// A row that reports a msgs/s metric (the dedupe stores, whose op is a
// batch) is shown and compared per message instead of per op.
//
// A group is a benchmark name up to its last slash, "BenchmarkWide" for
// "BenchmarkWide/bwmarrin-2"; the rest names the row. Rows whose name starts
// with -ours (default "idemq") are ours, the others peers; groups without
// both get no ratio columns, so any benchmark output can be piped in. Repeated
// runs (-count) are averaged. The exit status is 1 if the input holds a
// failure or no benchmark.
//
// Any other metric a row reports (b.ReportMetric) is shown, averaged, in
// a last column.
//
// A row may report a metric "<peer>-ns/op": the cost of a peer it took turns
// with in one loop, so that a machine's changing load falls on both alike
// (see package remoting's BenchmarkFingerprint). The peer becomes a row of
// the group; the B/op and allocs/op of such a pair cover both and are left
// out. The row's other metrics named "<peer>-<unit>" (msgs/s, CPU per
// message, …) are the peer's and shown in its row.
//
// It also draws SVG charts of chosen tables into -docs (docs/perf-*.svg)
// and rewrites the part of docs/performance.md between its marks to show
// them. The charts are drawn from the table as written, so that
// `go run ./cmd/benchtable -redraw` redraws them from RESULTS.md alone and
// a test can check that the committed charts match the committed table.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

func main() {
	out := flag.String("o", "RESULTS.md", "file to write the table to; empty for none")
	ours := flag.String("ours", "idemq", "prefix of the row names that are ours")
	docs := flag.String("docs", "../docs", "directory whose perf-*.svg charts and performance.md's charts part are redrawn from the table; empty for none")
	redraw := flag.Bool("redraw", false, "redraw the charts from the -o file instead of reading benchmark output")
	flag.Parse()

	if *redraw {
		if *out == "" || *docs == "" {
			fmt.Fprintln(os.Stderr, "benchtable: -redraw reads -o and writes into -docs: neither may be empty")
			os.Exit(2)
		}
		results, err := os.ReadFile(*out)
		if err == nil {
			err = writeDocs(*docs, string(results))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchtable:", err)
			os.Exit(1)
		}
		return
	}
	res, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
	table := render(res, *ours)
	fmt.Print(table)
	if *out != "" {
		if err := os.WriteFile(*out, []byte(table), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "benchtable:", err)
			os.Exit(1)
		}
	}
	// The charts are drawn from the table as printed, so that they can be
	// redrawn from RESULTS.md alone and always match it.
	if *docs != "" {
		if err := writeDocs(*docs, table); err != nil {
			fmt.Fprintln(os.Stderr, "benchtable:", err)
			os.Exit(1)
		}
	}
	if len(res.failures) > 0 {
		fmt.Fprintln(os.Stderr, "benchtable: the benchmark run failed:")
		for _, l := range res.failures {
			fmt.Fprintln(os.Stderr, "  "+l)
		}
		os.Exit(1)
	}
}

// row is one benchmark, averaged over its runs.
type row struct {
	name        string
	runs        int
	nsPerOp     float64
	msgsPerSec  float64
	bytesPerOp  float64
	allocsPerOp float64
	hasMem      bool
	paired      bool // timed in turns with a peer; its memory figures are the pair's
	// other holds the row's own metrics (b.ReportMetric: IDs/s,
	// p99.9-ns, rt/segment, …), in the order first reported.
	other []metric
}

// metric is a custom metric's running mean.
type metric struct {
	unit string
	mean float64
}

// group is the rows sharing a name up to the last slash, in input order.
type group struct {
	pkg, name string
	rows      []*row
}

type results struct {
	env      []string // goos, goarch, cpu
	groups   []*group
	failures []string
}

// benchLine matches "BenchmarkName-8   1000   123 ns/op   0 B/op ...".
var benchLine = regexp.MustCompile(`^(Benchmark\S*)\s+(\d+)\s+(.+)$`)

// procs matches the GOMAXPROCS suffix the testing package appends.
var procs = regexp.MustCompile(`-\d+$`)

func parse(r io.Reader) (*results, error) {
	res := &results{}
	byKey := map[string]*group{}
	var pkg string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "pkg: "):
			pkg = strings.TrimPrefix(line, "pkg: ")
		case strings.HasPrefix(line, "goos: "), strings.HasPrefix(line, "goarch: "), strings.HasPrefix(line, "cpu: "):
			if !slices.Contains(res.env, line) {
				res.env = append(res.env, line)
			}
		case strings.HasPrefix(line, "FAIL"), strings.HasPrefix(line, "--- FAIL"), strings.HasPrefix(line, "panic: "):
			res.failures = append(res.failures, line)
		}
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		full := procs.ReplaceAllString(m[1], "")
		gname, rname := full, ""
		if i := strings.LastIndexByte(full, '/'); i >= 0 {
			gname, rname = full[:i], full[i+1:]
		}
		g := byKey[pkg+" "+gname]
		if g == nil {
			g = &group{pkg: pkg, name: gname}
			byKey[pkg+" "+gname] = g
			res.groups = append(res.groups, g)
		}
		peers, err := g.row(rname).add(m[3])
		if err != nil {
			return nil, fmt.Errorf("%q: %w", line, err)
		}
		for _, p := range peers {
			if _, err := g.row(p.name).add(p.metrics); err != nil {
				return nil, err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(res.groups) == 0 {
		return nil, fmt.Errorf("no benchmark results in the input")
	}
	return res, nil
}

// row returns the row named name, added if new.
func (g *group) row(name string) *row {
	i := slices.IndexFunc(g.rows, func(r *row) bool { return r.name == name })
	if i < 0 {
		g.rows = append(g.rows, &row{name: name})
		i = len(g.rows) - 1
	}
	return g.rows[i]
}

// peer is a peer's metrics ("value unit" pairs) taken from a row that
// was timed in turns with it.
type peer struct {
	name, metrics string
}

// cost is the nanoseconds per message where the row counts messages, else
// per op.
func (r *row) cost() float64 {
	if r.msgsPerSec > 0 {
		return 1e9 / r.msgsPerSec
	}
	return r.nsPerOp
}

// add folds one run's "value unit" pairs into the running means, and
// returns the metrics of the peers it was timed with.
func (r *row) add(metrics string) ([]peer, error) {
	f := strings.Fields(metrics)
	if len(f)%2 != 0 {
		return nil, fmt.Errorf("odd number of fields in %q", metrics)
	}
	var peers []peer
	for i := 1; i < len(f); i += 2 {
		if name, ok := strings.CutSuffix(f[i], "-ns/op"); ok {
			peers = append(peers, peer{name: name})
		}
	}
	// A longer peer name first, so that "plain-tx-" is not read as "plain-";
	// the peers are returned in the order the row named them.
	byLength := slices.Clone(peers)
	slices.SortFunc(byLength, func(a, b peer) int { return len(b.name) - len(a.name) })
	r.runs++
	r.paired = r.paired || len(peers) > 0
	mean := func(old, v float64) float64 { return old + (v-old)/float64(r.runs) }
	for i := 0; i < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return nil, err
		}
		if j := slices.IndexFunc(byLength, func(p peer) bool { return strings.HasPrefix(f[i+1], p.name+"-") }); j >= 0 {
			k := slices.IndexFunc(peers, func(p peer) bool { return p.name == byLength[j].name })
			peers[k].metrics += " " + f[i] + " " + strings.TrimPrefix(f[i+1], peers[k].name+"-")
			continue
		}
		switch f[i+1] {
		case "ns/op":
			r.nsPerOp = mean(r.nsPerOp, v)
		case "B/op":
			r.bytesPerOp, r.hasMem = mean(r.bytesPerOp, v), true
		case "allocs/op":
			r.allocsPerOp = mean(r.allocsPerOp, v)
		case "msgs/s":
			r.msgsPerSec = mean(r.msgsPerSec, v)
		default:
			j := slices.IndexFunc(r.other, func(m metric) bool { return m.unit == f[i+1] })
			if j < 0 {
				r.other = append(r.other, metric{unit: f[i+1]})
				j = len(r.other) - 1
			}
			// Runs before the metric first showed count as zero.
			r.other[j].mean = mean(r.other[j].mean, v)
		}
	}
	return peers, nil
}

func render(res *results, ours string) string {
	var b strings.Builder
	b.WriteString("# Benchmark results\n\n")
	fmt.Fprintf(&b, "%s, %s.\n", strings.Join(res.env, ", "), runtime.Version())
	b.WriteString("One op is one ID for the ID generators and one message for the dedupe stores (from their msgs/s; their B/op and allocs/op are per batch). ")
	b.WriteString("A ratio is our cost per op divided by the peer's in the same run: below 1 is faster; ")
	b.WriteString("where the peer is the same work without dedupe (dedupe-off, plain-insert), the dedupe tax on throughput is 1 − 1/ratio.\n")
	pkg := ""
	for _, g := range res.groups {
		if g.pkg != pkg {
			pkg = g.pkg
			fmt.Fprintf(&b, "\n## %s\n", pkg)
		}
		var mine, peers []*row
		for _, r := range g.rows {
			if strings.HasPrefix(r.name, ours) {
				mine = append(mine, r)
			} else {
				peers = append(peers, r)
			}
		}
		if len(mine) == 0 {
			peers = nil // nothing to compare
		}
		fmt.Fprintf(&b, "\n### %s\n\n", strings.TrimPrefix(g.name, "Benchmark"))
		b.WriteString("| | ns/op | ops/s | B/op | allocs/op |")
		align := "|---|---:|---:|---:|---:|"
		for _, p := range peers {
			fmt.Fprintf(&b, " vs %s |", p.name)
			align += "---:|"
		}
		other := slices.ContainsFunc(g.rows, func(r *row) bool { return len(r.other) > 0 })
		if other {
			b.WriteString(" other metrics |")
			align += "---|"
		}
		b.WriteString("\n" + align + "\n")
		for _, r := range g.rows {
			name := r.name
			if name == "" {
				name = g.name
			}
			mem := "|  |  |"
			if r.hasMem && !r.paired {
				mem = fmt.Sprintf("| %s | %s |", num(r.bytesPerOp), num(r.allocsPerOp))
			}
			fmt.Fprintf(&b, "| %s | %s | %s %s", name, num(r.cost()), perSecond(r.cost()), mem)
			for _, p := range peers {
				if strings.HasPrefix(r.name, ours) && p.cost() > 0 {
					fmt.Fprintf(&b, " %.2f× |", r.cost()/p.cost())
				} else {
					b.WriteString("  |")
				}
			}
			if other {
				var ms []string
				for _, m := range r.other {
					ms = append(ms, m.unit+" "+metricNum(m.mean))
				}
				fmt.Fprintf(&b, " %s |", strings.Join(ms, ", "))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// num prints a measurement: whole numbers as such, others with 3 to 4
// significant digits.
func num(v float64) string {
	switch {
	case v == math.Trunc(v) || v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// metricNum prints a custom metric, large ones with a k, M or G suffix.
func metricNum(v float64) string {
	if v >= 1e4 {
		return suffixed(v)
	}
	return num(v)
}

// perSecond turns ns/op into operations per second, e.g. "4.06M".
func perSecond(ns float64) string {
	if ns <= 0 {
		return "-"
	}
	return suffixed(1e9 / ns)
}

// suffixed prints v with a k, M or G suffix, e.g. "4.06M".
func suffixed(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.2fG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.2fk", v/1e3)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}
