package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// chart is a horizontal bar chart: titled sections of bars on one scale.
type chart struct {
	title string
	// series names the parts of a stacked chart's bars, in order, for its
	// legend; a chart whose bars have one part has none.
	series   []string
	sections []section
	note     string // a footnote: where the figures come from
}

// section is a titled run of bars.
type section struct {
	title string
	bars  []bar
}

// bar is one row: its label, the lengths of its parts on the chart's scale
// (stacked in series order) and the text printed after it.
type bar struct {
	label string
	parts []float64
	value string
	ours  bool // an idemq row: a bold label and, with one part, the highlight colour
}

// The layout, in pixels. Text widths are estimated from the number of
// characters (the viewer picks the font), with room to spare.
const (
	pad        = 16
	fontSize   = 13
	charWidth  = 7.4 // an average character at fontSize, generously
	titleSize  = 15
	titleChar  = 9.2
	noteSize   = 11
	noteChar   = 6.3
	rowHeight  = 24
	barHeight  = 16
	barSpan    = 360 // the longest bar
	gap        = 8   // between a label, its bar and its value
	legendSwat = 12  // a legend entry's colour square
)

// Colours that read on GitHub's light and dark backgrounds alike: ours in
// blue, peers in grey, and one colour per series of a stacked chart.
const (
	oursColour = "#2f81f7"
	peerColour = "#8c959f"
)

var seriesColours = []string{"#2f81f7", "#d29922", "#a371f7", "#3fb950"}

// theme draws the chart on a background of its own, light or dark as the
// viewer prefers, so that its text reads whichever theme the page around
// it has.
const theme = `<style>
text{font-family:-apple-system,BlinkMacSystemFont,"Segoe UI",Helvetica,Arial,sans-serif;font-size:13px;fill:#1f2328}
.bg{fill:#ffffff}
.dim{fill:#59636e}
@media (prefers-color-scheme:dark){.bg{fill:#0d1117}text{fill:#e6edf3}.dim{fill:#9198a1}}
</style>
`

// svg draws c. The same chart gives the same bytes.
func (c chart) svg() []byte {
	labelWidth, valueWidth, scale := 0.0, 0.0, 0.0
	for _, s := range c.sections {
		for _, b := range s.bars {
			labelWidth = max(labelWidth, textWidth(b.label, charWidth))
			valueWidth = max(valueWidth, textWidth(b.value, charWidth))
			scale = max(scale, sum(b.parts))
		}
	}
	barX := pad + labelWidth + gap
	width := barX + barSpan + gap + valueWidth + pad
	width = max(width, 2*pad+textWidth(c.title, titleChar), 2*pad+textWidth(c.note, noteChar))
	for _, s := range c.sections {
		width = max(width, 2*pad+textWidth(s.title, charWidth))
	}

	var body strings.Builder
	y := float64(pad)
	fmt.Fprintf(&body, "<text x=\"%s\" y=\"%s\" style=\"font-size:%dpx;font-weight:bold\">%s</text>\n", px(pad), px(y+titleSize), titleSize, escape(c.title))
	y += titleSize + 12
	// A series no bar has (a metric the run did not report) stays out of
	// the legend.
	used := make([]bool, len(c.series))
	for _, s := range c.sections {
		for _, b := range s.bars {
			for i, p := range b.parts {
				if i < len(used) && p > 0 {
					used[i] = true
				}
			}
		}
	}
	if slices.Contains(used, true) {
		x := float64(pad)
		for i, name := range c.series {
			if !used[i] {
				continue
			}
			fmt.Fprintf(&body, "<rect x=\"%s\" y=\"%s\" width=\"%d\" height=\"%d\" fill=\"%s\"/>\n", px(x), px(y), legendSwat, legendSwat, seriesColours[i%len(seriesColours)])
			x += legendSwat + 6
			fmt.Fprintf(&body, "<text x=\"%s\" y=\"%s\">%s</text>\n", px(x), px(y+legendSwat-1), escape(name))
			x += textWidth(name, charWidth) + 18
		}
		width = max(width, x+pad)
		y += legendSwat + 10
	}
	if len(c.sections) == 0 {
		fmt.Fprintf(&body, "<text class=\"dim\" x=\"%s\" y=\"%s\">not in this run of make bench</text>\n", px(pad), px(y+fontSize))
		y += rowHeight
	}
	for _, s := range c.sections {
		y += 6
		fmt.Fprintf(&body, "<text x=\"%s\" y=\"%s\" style=\"font-weight:bold\">%s</text>\n", px(pad), px(y+fontSize), escape(s.title))
		y += fontSize + 9
		for _, b := range s.bars {
			baseline := y + barHeight - 4
			weight := ""
			if b.ours {
				weight = " style=\"font-weight:bold\""
			}
			fmt.Fprintf(&body, "<text x=\"%s\" y=\"%s\" text-anchor=\"end\"%s>%s</text>\n", px(barX-gap), px(baseline), weight, escape(b.label))
			x := barX
			for i, p := range b.parts {
				w := 0.0
				if scale > 0 {
					w = p / scale * barSpan
				}
				if w <= 0 {
					continue
				}
				colour := seriesColours[i%len(seriesColours)]
				if len(b.parts) == 1 {
					colour = peerColour
					if b.ours {
						colour = oursColour
					}
				}
				fmt.Fprintf(&body, "<rect x=\"%s\" y=\"%s\" width=\"%s\" height=\"%d\" fill=\"%s\"/>\n", px(x), px(y), px(w), barHeight, colour)
				x += w
			}
			fmt.Fprintf(&body, "<text x=\"%s\" y=\"%s\">%s</text>\n", px(x+gap), px(baseline), escape(b.value))
			y += rowHeight
		}
	}
	if c.note != "" {
		y += 8
		fmt.Fprintf(&body, "<text class=\"dim\" x=\"%s\" y=\"%s\" style=\"font-size:%dpx\">%s</text>\n", px(pad), px(y+noteSize), noteSize, escape(c.note))
		y += noteSize
	}
	height := y + pad

	var out strings.Builder
	fmt.Fprintf(&out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%s\" height=\"%s\" viewBox=\"0 0 %s %s\" role=\"img\" aria-label=\"%s\">\n",
		px(width), px(height), px(width), px(height), escape(c.title))
	fmt.Fprintf(&out, "<title>%s</title>\n", escape(c.title))
	out.WriteString(theme)
	fmt.Fprintf(&out, "<rect class=\"bg\" width=\"100%%\" height=\"100%%\" rx=\"6\"/>\n")
	out.WriteString(body.String())
	out.WriteString("</svg>\n")
	return []byte(out.String())
}

// textWidth estimates the width of s at per pixels a character.
func textWidth(s string, per float64) float64 {
	return float64(len([]rune(s))) * per
}

func sum(xs []float64) float64 {
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t
}

// px prints a coordinate to a tenth of a pixel.
func px(v float64) string {
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// escape makes s safe in SVG text and attribute values.
var escape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace
