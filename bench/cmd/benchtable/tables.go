package main

import (
	"fmt"
	"strconv"
	"strings"
)

// shown is a results file as render wrote it, read back: the charts are
// drawn from it rather than from the benchmark output, so that they show
// the table's figures as printed and can be redrawn from the committed
// file alone.
type shown struct {
	env string // "goos: linux, goarch: amd64, cpu: …, go1.26.8"
	// tables holds each group's rows by "<pkg> <group>", e.g.
	// "github.com/idemq/idemq/remoting EndToEnd/Redis".
	tables map[string][]shownRow
}

// shownRow is one row of a table, its cells as printed.
type shownRow struct {
	name   string
	cost   string // ns/op, or ns per message
	perSec string // ops/s, e.g. "36.41k"
	// other holds the "other metrics" cell's metrics by unit.
	other map[string]string
}

// readShown parses what render wrote.
func readShown(md string) (*shown, error) {
	s := &shown{tables: map[string][]shownRow{}}
	var pkg, group string
	otherCol := -1
	for i, line := range strings.Split(md, "\n") {
		switch {
		case i == 2: // render's third line, after the heading and a blank one
			s.env = strings.TrimSuffix(line, ".")
		case strings.HasPrefix(line, "## "):
			pkg = strings.TrimPrefix(line, "## ")
		case strings.HasPrefix(line, "### "):
			group = strings.TrimPrefix(line, "### ")
		case strings.HasPrefix(line, "| |"):
			otherCol = -1
			for j, c := range cells(line) {
				if c == "other metrics" {
					otherCol = j
				}
			}
		case strings.HasPrefix(line, "|---"):
		case strings.HasPrefix(line, "| "):
			c := cells(line)
			if len(c) < 3 || group == "" {
				return nil, fmt.Errorf("line %d: not a row of a table: %q", i+1, line)
			}
			r := shownRow{name: c[0], cost: c[1], perSec: c[2], other: map[string]string{}}
			if otherCol >= 0 && otherCol < len(c) && c[otherCol] != "" {
				for _, m := range strings.Split(c[otherCol], ", ") {
					unit, v, ok := strings.Cut(m, " ")
					if !ok {
						return nil, fmt.Errorf("line %d: metric %q", i+1, m)
					}
					r.other[unit] = v
				}
			}
			key := pkg + " " + group
			s.tables[key] = append(s.tables[key], r)
		}
	}
	if len(s.tables) == 0 {
		return nil, fmt.Errorf("no table in the results")
	}
	return s, nil
}

// cells returns a markdown table line's cells, trimmed, without the empty
// ones outside its first and last bar.
func cells(line string) []string {
	f := strings.Split(strings.Trim(line, "|"), "|")
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	return f
}

// row returns the row named name of the table key.
func (s *shown) row(key, name string) (shownRow, bool) {
	for _, r := range s.tables[key] {
		if r.name == name {
			return r, true
		}
	}
	return shownRow{}, false
}

// parseShown reads a figure as num, metricNum or suffixed print it.
func parseShown(s string) (float64, error) {
	mult := 1.0
	switch {
	case strings.HasSuffix(s, "k"):
		mult = 1e3
	case strings.HasSuffix(s, "M"):
		mult = 1e6
	case strings.HasSuffix(s, "G"):
		mult = 1e9
	}
	if mult != 1 {
		s = s[:len(s)-1]
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, err
	}
	return v * mult, nil
}
