package examples_test

import (
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	// goBlockRE finds a page's Go blocks.
	goBlockRE = regexp.MustCompile("(?s)```go\n(.*?)```")
	// sourceRE finds where a block says it comes from, in the text before
	// it: "from `<package dir>`'s `<Example>`".
	sourceRE = regexp.MustCompile("from\\s+`([^`]+)`'s\\s+`(Example[^`]*)`")
)

// partMarker begins the comment that opens a block which is not a whole
// program; the comment says what the program defines before it.
const partMarker = "// Part of a program"

// frontPage is the README, relative to this directory; the guides are
// docs/*.md beside it.
const frontPage = "../README.md"

// pages returns the README and every guide under docs/, the pages whose
// Go blocks must be cut from compiled Examples.
func pages(t *testing.T) []string {
	t.Helper()
	guides, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{frontPage}, guides...)
}

// A snippet is one Go block of a page and the Example it is cut from.
type snippet struct {
	// file is the page that shows the block, as pages names it.
	file string
	// dir and name are the Example's package directory and function.
	dir, name string
	// code is the block as the page shows it.
	code string
}

// program reports whether the snippet is a whole program.
func (s snippet) program() bool { return strings.HasPrefix(s.code, "package main\n") }

// String names the snippet in failures: the page, then the Example.
func (s snippet) String() string {
	return fmt.Sprintf("%s: snippet from %s's %s", strings.TrimPrefix(s.file, "../"), s.dir, s.name)
}

// pageSnippets returns the Go blocks of the README and of every guide
// under docs/, failing t for one that does not say which Example it comes
// from.
func pageSnippets(t *testing.T) []snippet {
	t.Helper()
	var out []snippet
	for _, file := range pages(t) {
		page, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		text := string(page)
		prev := 0
		for _, m := range goBlockRE.FindAllStringSubmatchIndex(text, -1) {
			code := text[m[2]:m[3]]
			src := sourceRE.FindAllStringSubmatch(text[prev:m[0]], -1)
			prev = m[1]
			if src == nil {
				t.Errorf("%s: Go block names no Example it comes from (\"from `dir`'s `ExampleX`\" before it):\n%s", strings.TrimPrefix(file, "../"), code)
				continue
			}
			last := src[len(src)-1]
			out = append(out, snippet{file: file, dir: last[1], name: last[2], code: code})
		}
	}
	if !slices.ContainsFunc(out, func(s snippet) bool { return s.file == frontPage }) {
		t.Fatal("README has no Go block")
	}
	return out
}

// TestREADMESnippetsAreExamples keeps the Go blocks of the README and of
// every guide under docs/ in step with the compiled, tested Example
// functions they are cut from. A block is
// either a whole program, package main whose main is its Example's whole
// body, or a part of one: a comment that begins with partMarker, then an
// optional import block, then a run of whole lines of the Example's body.
// Every import a block shows is one of its Example's file.
func TestREADMESnippetsAreExamples(t *testing.T) {
	for _, s := range pageSnippets(t) {
		imports, body := example(t, filepath.Join("..", s.dir), s.name)
		checkImports := func(block string) {
			for _, l := range strings.Split(block, "\n") {
				if l = strings.TrimSpace(l); l != "" && !slices.Contains(imports, l) {
					t.Errorf("%s imports %s, which its file does not", s, l)
				}
			}
		}
		if s.program() {
			if formatted, err := format.Source([]byte(s.code)); err != nil || string(formatted) != s.code {
				t.Errorf("%s is a program not gofmt-formatted (%v)", s, err)
			}
			rest, ok := strings.CutPrefix(s.code, "package main\n\nimport (\n")
			block, rest, ok2 := strings.Cut(rest, "\n)\n\nfunc main() {\n")
			main, ok3 := strings.CutSuffix(rest, "}\n")
			if !ok || !ok2 || !ok3 {
				t.Errorf("%s is a program but not package main, one import block and func main", s)
				continue
			}
			checkImports(block)
			lines := strings.Split(main, "\n")
			for i, l := range lines {
				lines[i] = strings.TrimPrefix(l, "\t")
			}
			if strings.Join(lines, "\n") != body {
				t.Errorf("%s is a program but not its whole body; copy it again:\n%s", s, main)
			}
			continue
		}
		code, ok := strings.CutPrefix(s.code, partMarker)
		if !ok {
			t.Errorf("%s is neither a program (package main) nor marked %q:\n%s", s, partMarker, s.code)
			continue
		}
		// The marker's comment ends at its first blank line.
		_, code, _ = strings.Cut(code, "\n\n")
		if block, rest, ok := strings.Cut(code, ")\n\n"); ok && strings.HasPrefix(block, "import (\n") {
			checkImports(strings.TrimPrefix(block, "import (\n"))
			code = rest
		}
		if !strings.Contains("\n"+body, "\n"+code) {
			t.Errorf("%s is not a part of it; copy it again:\n%s", s, code)
		}
	}
}

// example returns the import lines of the test file in dir that holds func
// name, trimmed, and the function's body, one tab of indentation removed.
func example(t *testing.T, dir, name string) (imports []string, body string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		_, rest, ok := strings.Cut(string(src), "\nfunc "+name+"() {\n")
		if !ok {
			continue
		}
		if _, block, ok := strings.Cut(string(src), "\nimport (\n"); ok {
			block, _, _ = strings.Cut(block, "\n)\n")
			for _, l := range strings.Split(block, "\n") {
				imports = append(imports, strings.TrimSpace(l))
			}
		}
		body, _, _ = strings.Cut(rest, "\n}\n")
		lines := strings.Split(body, "\n")
		for i, l := range lines {
			lines[i] = strings.TrimPrefix(l, "\t")
		}
		return imports, strings.Join(lines, "\n") + "\n"
	}
	t.Fatalf("no func %s in %s", name, dir)
	return nil, ""
}
