package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The marks around the part of docs/performance.md that the charts own;
// the prose outside them is written by hand.
const (
	beginMark = "<!-- benchtable charts: written by bench/cmd/benchtable from bench/RESULTS.md; edits between the marks are overwritten -->"
	endMark   = "<!-- end of benchtable charts -->"
)

// chartSpec says what one chart shows: which rows of which tables, and
// what figure of a row makes its bar.
type chartSpec struct {
	file     string // in docs/
	title    string
	series   []string
	measure  func(r shownRow, s sectionSpec) (b bar, ok bool, err error)
	sections []sectionSpec
}

// sectionSpec is a section of a chart: rows of one table, in the order
// given, under labels a reader knows.
type sectionSpec struct {
	title string
	table string // "<pkg> <group>" as in shown.tables
	rows  []rowSpec
	// server and serverUnit name the store's server process and its CPU
	// metric, for cpuPerMessage; empty where the store runs in the
	// consumer's process.
	server, serverUnit string
	// aside are rows given in the section's title rather than drawn: a
	// figure so far above the others that on one scale their bars would
	// not show.
	aside []rowSpec
}

type rowSpec struct {
	name  string // in the table
	label string
}

const (
	remotingPkg = "github.com/idemq/idemq/remoting "
	benchPkg    = "github.com/idemq/idemq/bench "
)

var (
	redisRows = []rowSpec{{"dedupe-off", "none (dedupe off)"}, {"idemq", "idemq"}, {"naive", "naive SET NX + SET"}}
	txRows    = []rowSpec{{"idemq", "idemq Consumer.Tx"}, {"plain-tx", "plain transaction"}, {"plain-insert", "plain INSERT, autocommit"}}
	twitterID = []rowSpec{{"idemq", "idemq"}, {"bwmarrin", "bwmarrin/snowflake"}, {"sonyflake", "sony/sonyflake"}}
	wideID    = []rowSpec{
		{"idemq", "idemq"}, {"idemq-coarse", "idemq, coarse clock"},
		{"idemq-fill64", "idemq Fill, 64 at a time"}, {"idemq-coarse-fill64", "idemq Fill, coarse clock"},
		{"bwmarrin", "bwmarrin/snowflake"}, {"sonyflake", "sony/sonyflake"},
	}
	redisSections = []sectionSpec{
		{title: "RocketMQ over Redis, default push consumer: one message per callback", table: remotingPkg + "EndToEnd/Redis", rows: redisRows, server: "Redis", serverUnit: "redis-µs/msg"},
		{title: "RocketMQ over Redis, 32 messages per callback", table: remotingPkg + "EndToEnd/Redis-batch32", rows: redisRows, server: "Redis", serverUnit: "redis-µs/msg"},
	}
	// brokerRows are the Kafka and NATS end-to-end rows.
	brokerRows     = []rowSpec{{"idemq", "idemq"}, {"naive", "naive SET NX + SET"}, {"watermill-dedup", "watermill Deduplicator, in memory"}}
	brokerNone     = rowSpec{"dedupe-off", "none (dedupe off)"}
	brokerSections = func(throughput bool) []sectionSpec {
		var ss []sectionSpec
		for _, b := range []struct{ name, group, consumer string }{
			{"Kafka", "KafkaEndToEnd", "a goroutine per partition"},
			{"NATS JetStream", "NATSEndToEnd", "20 goroutines"},
		} {
			rows, aside := append([]rowSpec{brokerNone}, brokerRows...), []rowSpec(nil)
			// Kafka without dedupe hands out records some fifty times faster
			// than any consumer that makes a store round trip per message:
			// on one scale their bars would not show.
			if throughput && b.group == "KafkaEndToEnd" {
				rows, aside = brokerRows, []rowSpec{brokerNone}
			}
			ss = append(ss,
				sectionSpec{title: b.name + ", one message per store round trip (" + b.consumer + ")", table: benchPkg + b.group + "/Redis",
					rows: rows, aside: aside, server: "Redis", serverUnit: "redis-µs/msg"},
				sectionSpec{title: b.name + ", up to 32 messages per store round trip", table: benchPkg + b.group + "/Redis-batch32",
					rows: rows, aside: aside, server: "Redis", serverUnit: "redis-µs/msg"})
		}
		return ss
	}
	txSections = []sectionSpec{
		{title: "MariaDB, one commit per message", table: remotingPkg + "EndToEnd/MySQL-tx", rows: txRows, server: "MariaDB", serverUnit: "db-µs/msg"},
		{title: "PostgreSQL, one commit per message", table: remotingPkg + "EndToEnd/Postgres-tx", rows: txRows, server: "PostgreSQL", serverUnit: "db-µs/msg"},
		{title: "SQLite, one commit per message (in the consumer's process)", table: remotingPkg + "EndToEnd/SQLite-tx", rows: txRows},
	}
)

// charts are the charts that make bench draws into docs/.
var charts = []chartSpec{
	{
		file:     "perf-redis.svg",
		title:    "End to end through RocketMQ over Redis: messages per second (longer is better)",
		measure:  throughput,
		sections: redisSections,
	},
	{
		file:     "perf-brokers.svg",
		title:    "Kafka and NATS JetStream end to end over Redis: messages per second (longer is better)",
		measure:  throughput,
		sections: brokerSections(true),
	},
	{
		file:     "perf-sql.svg",
		title:    "Exactly-once over SQL, end to end: messages per second (longer is better)",
		measure:  throughput,
		sections: txSections,
	},
	{
		file:     "perf-cpu.svg",
		title:    "CPU time per message by process, end to end (shorter is better)",
		series:   []string{"consumer process", "Redis or database server", "broker"},
		measure:  cpuPerMessage,
		sections: slices.Concat(redisSections, txSections, brokerSections(false)),
	},
	{
		file:    "perf-ids.svg",
		title:   "ID generators: nanoseconds per ID (shorter is better)",
		measure: nsPerID,
		sections: []sectionSpec{
			{title: "Twitter layout, one goroutine (its 12-bit sequence allows 244 ns at best)", table: benchPkg + "Twitter", rows: twitterID},
			{title: "Twitter layout, parallel goroutines", table: benchPkg + "TwitterParallel", rows: twitterID},
			{title: "Wide layout (20-bit sequence), one goroutine", table: benchPkg + "Wide", rows: wideID},
			{title: "Wide layout, parallel goroutines", table: benchPkg + "WideParallel", rows: wideID},
		},
	},
}

// throughput is a row's messages per second.
func throughput(r shownRow, _ sectionSpec) (bar, bool, error) {
	v, err := parseShown(r.perSec)
	if err != nil {
		return bar{}, false, fmt.Errorf("ops/s %q: %w", r.perSec, err)
	}
	return bar{parts: []float64{v}, value: r.perSec + " msgs/s"}, true, nil
}

// nsPerID is a row's cost per op, one ID.
func nsPerID(r shownRow, _ sectionSpec) (bar, bool, error) {
	v, err := parseShown(r.cost)
	if err != nil {
		return bar{}, false, fmt.Errorf("ns/op %q: %w", r.cost, err)
	}
	return bar{parts: []float64{v}, value: r.cost + " ns"}, true, nil
}

// cpuPerMessage stacks the CPU time per message of the consumer's
// process, the store's server and the broker; a process whose metric the
// row lacks (the broker's before it was measured) is left out.
func cpuPerMessage(r shownRow, s sectionSpec) (bar, bool, error) {
	if _, ok := r.other["cpu-µs/msg"]; !ok {
		return bar{}, false, nil
	}
	var b bar
	var terms []string
	total := 0.0
	for _, p := range []struct{ unit, name string }{{"cpu-µs/msg", "consumer"}, {s.serverUnit, s.server}, {"broker-µs/msg", "broker"}} {
		text, ok := r.other[p.unit]
		if p.unit == "" || !ok {
			b.parts = append(b.parts, 0)
			continue
		}
		v, err := parseShown(text)
		if err != nil {
			return bar{}, false, fmt.Errorf("%s %q: %w", p.unit, text, err)
		}
		b.parts = append(b.parts, v)
		terms = append(terms, text+" "+p.name)
		total += v
	}
	b.value = num(total) + " µs"
	if len(terms) > 1 {
		b.value += " = " + strings.Join(terms, " + ")
	}
	return b, true, nil
}

// draw builds the chart that spec describes from the table.
func (spec chartSpec) draw(t *shown) (chart, error) {
	c := chart{title: spec.title, series: spec.series, note: "From bench/RESULTS.md: make bench on " + t.env}
	for _, ss := range spec.sections {
		s := section{title: ss.title}
		for _, rs := range ss.aside {
			r, ok := t.row(ss.table, rs.name)
			if !ok {
				continue
			}
			b, ok, err := spec.measure(r, ss)
			if err != nil {
				return chart{}, fmt.Errorf("%s, %s row %s: %w", spec.file, ss.table, rs.name, err)
			}
			if ok {
				s.title += fmt.Sprintf("; %s: %s, off the scale", rs.label, b.value)
			}
		}
		for _, rs := range ss.rows {
			r, ok := t.row(ss.table, rs.name)
			if !ok {
				continue
			}
			b, ok, err := spec.measure(r, ss)
			if err != nil {
				return chart{}, fmt.Errorf("%s, %s row %s: %w", spec.file, ss.table, rs.name, err)
			}
			if !ok {
				continue
			}
			// The specs name this repository's rows, whose ours are idemq….
			b.label, b.ours = rs.label, strings.HasPrefix(rs.name, "idemq")
			s.bars = append(s.bars, b)
		}
		if len(s.bars) > 0 {
			c.sections = append(c.sections, s)
		}
	}
	return c, nil
}

// docFile is a file of docs/ and its content.
type docFile struct {
	name    string
	content []byte
}

// docFiles returns the charts of results (RESULTS.md as render wrote
// it) and performance (docs/performance.md) with the part between its
// marks rewritten to show them.
func docFiles(results, performance string) ([]docFile, error) {
	t, err := readShown(results)
	if err != nil {
		return nil, err
	}
	var files []docFile
	var md strings.Builder
	fmt.Fprintf(&md, "Drawn by `make bench` from the tables of [`bench/RESULTS.md`](../bench/RESULTS.md) (%s); the bars of a chart come from one run.\n", t.env)
	for _, spec := range charts {
		c, err := spec.draw(t)
		if err != nil {
			return nil, err
		}
		files = append(files, docFile{spec.file, c.svg()})
		fmt.Fprintf(&md, "\n![%s](%s)\n", spec.title, spec.file)
	}
	perf, err := splice(performance, md.String())
	if err != nil {
		return nil, err
	}
	return append(files, docFile{"performance.md", []byte(perf)}), nil
}

// splice replaces what lies between doc's marks with part.
func splice(doc, part string) (string, error) {
	i := strings.Index(doc, beginMark)
	j := strings.Index(doc, endMark)
	if i < 0 || j < i {
		return "", fmt.Errorf("performance.md: no %q line followed by %q", beginMark, endMark)
	}
	return doc[:i+len(beginMark)] + "\n" + part + doc[j:], nil
}

// writeDocs rewrites the charts and the charts part of performance.md in
// dir from results.
func writeDocs(dir, results string) error {
	perf, err := os.ReadFile(filepath.Join(dir, "performance.md"))
	if err != nil {
		return err
	}
	files, err := docFiles(results, string(perf))
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.content, 0o644); err != nil {
			return err
		}
	}
	return nil
}
