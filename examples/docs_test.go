package examples_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// maxFrontPage is the most lines the README may have: it is the front
// page, and everything else is a guide under docs/.
const maxFrontPage = 200

// The client a user must pin, and the module idemq's go.mod requires it in.
const (
	remotingClient = "github.com/apache/rocketmq-client-go/v2"
	grpcClient     = "github.com/apache/rocketmq-clients/golang/v5"
)

// goMod returns the go directive of this module's go.mod and the version
// it requires of mod.
func goMod(t *testing.T, mod string) (goVersion, version string) {
	t.Helper()
	src, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	g := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(src)
	v := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(mod) + ` (\S+)`).FindSubmatch(src)
	if g == nil || v == nil {
		t.Fatalf("go.mod has no go directive or no requirement of %s", mod)
	}
	return string(g[1]), string(v[1])
}

// goModMarker opens the README's block of the go.mod lines a user needs.
const goModMarker = "```\n// go.mod"

// frontPageGoMod returns the README's go.mod lines, its marker comment
// left out: a go directive and require lines.
func frontPageGoMod(t *testing.T) string {
	t.Helper()
	page, err := os.ReadFile(frontPage)
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(page), goModMarker)
	block, _, ok2 := strings.Cut(block, "```\n")
	if !ok || !ok2 {
		t.Fatalf("README has no block of go.mod lines (%q)", goModMarker)
	}
	_, block, _ = strings.Cut(block, "\n") // the rest of the marker's line
	return block
}

// TestREADMEIsAFrontPage keeps the README short and its install lines
// true: the go get lines and the go.mod lines pin the client this module
// requires, at the go directive it declares; and every page that names the
// clients' versions names the ones go.mod requires.
func TestREADMEIsAFrontPage(t *testing.T) {
	page, err := os.ReadFile(frontPage)
	if err != nil {
		t.Fatal(err)
	}
	text := string(page)
	if n := strings.Count(text, "\n"); n > maxFrontPage {
		t.Errorf("README has %d lines; a front page has at most %d: move the rest to a guide under docs/", n, maxFrontPage)
	}
	goVersion, pin := goMod(t, remotingClient)
	for _, want := range []string{
		"\ngo get github.com/idemq/idemq@latest\n",
		"\ngo get " + remotingClient + "@" + pin + "\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("README lacks the line %q", strings.TrimSpace(want))
		}
	}
	lines := frontPageGoMod(t)
	for _, want := range []string{"go " + goVersion, "require " + remotingClient + " " + pin} {
		if !strings.Contains("\n"+lines, "\n"+want+"\n") {
			t.Errorf("README's go.mod lines lack %q (go.mod has it):\n%s", want, lines)
		}
	}

	// A pseudo-version on any page is the client's pin.
	pseudo := regexp.MustCompile(`v\d+\.\d+\.\d+-0\.\d{14}-[0-9a-f]{12}`)
	_, grpcVersion := goMod(t, grpcClient)
	for _, file := range pages(t) {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range pseudo.FindAllString(string(src), -1) {
			if v != pin {
				t.Errorf("%s names rocketmq-client-go at %s; go.mod requires %s", file, v, pin)
			}
		}
		if strings.HasSuffix(file, "/rocketmq5.md") && !strings.Contains(string(src), grpcVersion) {
			t.Errorf("%s does not name %s, the gRPC client's version go.mod requires", file, grpcVersion)
		}
	}
}

var (
	// linkRE finds a Markdown link's target.
	linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// fenceRE finds fenced blocks, which hold no links.
	fenceRE = regexp.MustCompile("(?s)```.*?```")
	// headingRE finds a page's headings.
	headingRE = regexp.MustCompile(`(?m)^#+ (.+)$`)
)

// pkgGoDev prefixes the package documentation of this module.
const pkgGoDev = "https://pkg.go.dev/" + module

// TestGuidesLinkUp keeps the README and the guides one set of pages: the
// README's where-next table links every guide, every guide opens with its
// title, a one-line summary and a link back, and every relative link (and
// its #anchor) and every link to this module's package documentation
// leads somewhere.
func TestGuidesLinkUp(t *testing.T) {
	texts := map[string]string{}
	for _, file := range pages(t) {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		texts[file] = string(src)
	}
	for file, text := range texts {
		if file == frontPage {
			continue
		}
		guide := "docs/" + filepath.Base(file)
		if !strings.Contains(texts[frontPage], "]("+guide+")") {
			t.Errorf("README's where-next table does not link %s", guide)
		}
		lines := strings.SplitN(text, "\n", 5)
		if len(lines) < 5 || !strings.HasPrefix(lines[0], "# ") || lines[1] != "" || lines[3] != "" ||
			!strings.Contains(lines[2], "[README](../README.md)") {
			t.Errorf("%s does not open with a title, a blank line, a one-line summary that links back to the [README](../README.md), and a blank line", guide)
		}
	}
	for file, text := range texts {
		for _, m := range linkRE.FindAllStringSubmatch(fenceRE.ReplaceAllString(text, ""), -1) {
			target := m[1]
			if rest, ok := strings.CutPrefix(target, pkgGoDev); ok {
				if rest != "" && !isPackage(filepath.Join("..", filepath.FromSlash(rest))) {
					t.Errorf("%s links %s, the documentation of no package of the module", file, target)
				}
				continue
			}
			if strings.Contains(target, "://") {
				continue
			}
			name, anchor, _ := strings.Cut(target, "#")
			linked := file
			if name != "" {
				linked = filepath.Join(filepath.Dir(file), filepath.FromSlash(name))
			}
			if _, err := os.Stat(linked); err != nil {
				t.Errorf("%s links %s, which does not exist", file, target)
				continue
			}
			if anchor == "" {
				continue
			}
			src, ok := texts[filepath.ToSlash(linked)]
			if !ok {
				b, err := os.ReadFile(linked)
				if err != nil {
					t.Fatal(err)
				}
				src = string(b)
			}
			found := false
			for _, h := range headingRE.FindAllStringSubmatch(fenceRE.ReplaceAllString(src, ""), -1) {
				found = found || slug(h[1]) == anchor
			}
			if !found {
				t.Errorf("%s links %s: %s has no heading #%s", file, target, linked, anchor)
			}
		}
	}
}

// isPackage reports whether dir holds a package: a Go file not a test.
func isPackage(dir string) bool {
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			return true
		}
	}
	return false
}

// slug returns the anchor GitHub gives a heading: lower case, letters,
// digits, hyphens and underscores kept, spaces made hyphens, the rest
// dropped.
func slug(heading string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == ' ':
			return '-'
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			return unicode.ToLower(r)
		}
		return -1
	}, heading)
}

// TestNoNeedlessImportAliases keeps the README, the guides and the example
// programs from renaming an idemq package where its own name would do: an
// alias is needed only when another import of the same file takes that name.
func TestNoNeedlessImportAliases(t *testing.T) {
	for _, s := range pageSnippets(t) {
		fileImports, _ := example(t, filepath.Join("..", s.dir), s.name)
		_, block, ok := strings.Cut(s.code, "import (\n")
		block, _, _ = strings.Cut(block, "\n)")
		if !ok {
			continue
		}
		for _, l := range strings.Split(block, "\n") {
			if msg := needlessAlias(strings.TrimSpace(l), fileImports); msg != "" {
				t.Errorf("%s: %s", s, msg)
			}
		}
	}
	err := filepath.WalkDir(".", func(file string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(file, ".go") || strings.HasSuffix(file, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		var lines []string
		for _, imp := range f.Imports {
			l := imp.Path.Value
			if imp.Name != nil {
				l = imp.Name.Name + " " + l
			}
			lines = append(lines, l)
		}
		for _, l := range lines {
			if msg := needlessAlias(l, lines); msg != "" {
				t.Errorf("examples/%s: %s", file, msg)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// importRE splits an import line into its optional name and its path.
var importRE = regexp.MustCompile(`^(?:(\S+)\s+)?"([^"]+)"$`)

// needlessAlias returns why the import line l renames an idemq package it
// need not rename, given all the import lines of its file, or "".
func needlessAlias(l string, all []string) string {
	m := importRE.FindStringSubmatch(l)
	if m == nil || m[1] == "" || m[1] == "_" || m[1] == "." || !strings.HasPrefix(m[2], module+"/") {
		return ""
	}
	own := path.Base(m[2])
	for _, other := range all {
		o := importRE.FindStringSubmatch(other)
		if o == nil || o[2] == m[2] {
			continue
		}
		if importName(o) == own {
			return ""
		}
	}
	return "imports " + m[2] + " as " + m[1] + ", though no other import is named " + strconv.Quote(own)
}

// importName returns the name a matched import line brings into its file:
// its alias, or the last element of its path that is not a major version.
func importName(m []string) string {
	if m[1] != "" {
		return m[1]
	}
	p := m[2]
	if base := path.Base(p); regexp.MustCompile(`^v\d+$`).MatchString(base) {
		p = path.Dir(p)
	}
	return path.Base(p)
}
