package main

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// barRect matches a bar's part as svg draws it.
var barRect = regexp.MustCompile(`<rect x="([0-9.]+)" y="[0-9.]+" width="([0-9.]+)" height="16" fill="(#[0-9a-f]+)"/>`)

// drawn is a part of a bar as drawn.
type drawn struct {
	x, width float64
	colour   string
}

func parts(t *testing.T, svg []byte) []drawn {
	t.Helper()
	var ds []drawn
	for _, m := range barRect.FindAllStringSubmatch(string(svg), -1) {
		x, err1 := strconv.ParseFloat(m[1], 64)
		w, err2 := strconv.ParseFloat(m[2], 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("rect %q", m[0])
		}
		ds = append(ds, drawn{x, w, m[3]})
	}
	return ds
}

func TestSVGBarLengths(t *testing.T) {
	for _, tc := range []struct {
		name   string
		c      chart
		widths []float64 // of every part drawn, in order
		// offsets are where each part starts, from where the bars do:
		// a bar's parts end to end.
		offsets []float64
	}{
		{
			name: "one part: proportional to the longest",
			c: chart{title: "t", sections: []section{{title: "s", bars: []bar{
				{label: "a", parts: []float64{100}, value: "100", ours: true},
				{label: "b", parts: []float64{50}, value: "50"},
				{label: "c", parts: []float64{25}, value: "25"},
			}}}},
			widths:  []float64{barSpan, barSpan / 2, barSpan / 4},
			offsets: []float64{0, 0, 0},
		},
		{
			name: "one scale across sections",
			c: chart{title: "t", sections: []section{
				{title: "s1", bars: []bar{{label: "a", parts: []float64{10}, value: "10"}}},
				{title: "s2", bars: []bar{{label: "b", parts: []float64{40}, value: "40"}}},
			}},
			widths:  []float64{barSpan / 4, barSpan},
			offsets: []float64{0, 0},
		},
		{
			name: "stacked: the total is proportional, zero parts not drawn",
			c: chart{title: "t", series: []string{"x", "y", "z"}, sections: []section{{title: "s", bars: []bar{
				{label: "a", parts: []float64{30, 10, 20}, value: "60"},
				{label: "b", parts: []float64{15, 0, 0}, value: "15"},
			}}}},
			widths:  []float64{barSpan / 2, barSpan / 6, barSpan / 3, barSpan / 4},
			offsets: []float64{0, barSpan / 2, barSpan * 2 / 3, 0},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := parts(t, tc.c.svg())
			if len(got) != len(tc.widths) {
				t.Fatalf("%d parts drawn, want %d: %+v", len(got), len(tc.widths), got)
			}
			for i, d := range got {
				if d.width < tc.widths[i]-0.05 || d.width > tc.widths[i]+0.05 {
					t.Errorf("part %d: width %.1f, want %.1f", i, d.width, tc.widths[i])
				}
				if off := d.x - got[0].x; off < tc.offsets[i]-0.15 || off > tc.offsets[i]+0.15 {
					t.Errorf("part %d starts %.1f after the bars, want %.1f", i, off, tc.offsets[i])
				}
			}
		})
	}
}

func TestSVGColours(t *testing.T) {
	c := chart{title: "t", sections: []section{{title: "s", bars: []bar{
		{label: "idemq", parts: []float64{2}, value: "2", ours: true},
		{label: "peer", parts: []float64{1}, value: "1"},
	}}}}
	got := parts(t, c.svg())
	if len(got) != 2 || got[0].colour != oursColour || got[1].colour != peerColour {
		t.Errorf("colours %+v, want ours %s then a peer's %s", got, oursColour, peerColour)
	}
	stacked := chart{title: "t", series: []string{"x", "y"}, sections: []section{{title: "s", bars: []bar{
		{label: "idemq", parts: []float64{1, 1}, value: "2", ours: true},
	}}}}
	got = parts(t, stacked.svg())
	if len(got) != 2 || got[0].colour != seriesColours[0] || got[1].colour != seriesColours[1] {
		t.Errorf("stacked colours %+v, want one per series", got)
	}
}

func TestSVGText(t *testing.T) {
	c := chart{
		title:  `a <b> & "c"`,
		series: []string{"x&y", "unused", "z"},
		sections: []section{{title: "s<1>", bars: []bar{
			{label: `naive SET NX + "SET" <&>`, parts: []float64{1, 0, 1}, value: "2 µs <total>"},
		}}},
		note: "from <here>",
	}
	svg := string(c.svg())
	for _, want := range []string{
		`<title>a &lt;b&gt; &amp; &quot;c&quot;</title>`,
		`aria-label="a &lt;b&gt; &amp; &quot;c&quot;"`,
		`>x&amp;y</text>`,
		`>z</text>`,
		`>s&lt;1&gt;</text>`,
		`>naive SET NX + &quot;SET&quot; &lt;&amp;&gt;</text>`,
		`>2 µs &lt;total&gt;</text>`,
		`>from &lt;here&gt;</text>`,
		"@media (prefers-color-scheme:dark)",
	} {
		if !strings.Contains(svg, want) {
			t.Errorf("svg lacks %q:\n%s", want, svg)
		}
	}
	// A series that no bar has stays out of the legend; nothing
	// unescaped gets through.
	for _, unwanted := range []string{">unused<", "<b>", "<total>", "<here>", "<&>"} {
		if strings.Contains(svg, unwanted) {
			t.Errorf("svg holds %q:\n%s", unwanted, svg)
		}
	}
	if !bytes.Equal(c.svg(), c.svg()) {
		t.Error("two drawings of one chart differ")
	}
}

func TestSVGEmpty(t *testing.T) {
	svg := string(chart{title: "t"}.svg())
	if !strings.Contains(svg, "not in this run of make bench") || strings.Contains(svg, "<rect x=") {
		t.Errorf("a chart without bars:\n%s", svg)
	}
}
