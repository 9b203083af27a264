package examples_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// snippetRE finds the README's Go blocks that say which Example they come
// from: "from `<package dir>`'s `<Example>`", then the block.
var snippetRE = regexp.MustCompile("(?s)from\\s+`([^`]+)`'s `(Example[^`]*)`[^`]*?```go\n(.*?)```")

// TestREADMESnippetsAreExamples keeps the README's snippets in step with
// the compiled, tested Example functions they are cut from: each must be a
// run of whole lines of its Example's body, after an optional import block
// whose every line is an import of the Example's file.
func TestREADMESnippetsAreExamples(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	found := snippetRE.FindAllStringSubmatch(string(readme), -1)
	if len(found) == 0 {
		t.Fatal("no README snippet names its Example")
	}
	for _, m := range found {
		dir, name, snippet := m[1], m[2], m[3]
		imports, body := example(t, filepath.Join("..", dir), name)
		if block, rest, ok := strings.Cut(snippet, ")\n\n"); ok && strings.HasPrefix(block, "import (\n") {
			for _, l := range strings.Split(strings.TrimPrefix(block, "import (\n"), "\n") {
				if l = strings.TrimSpace(l); l != "" && !slices.Contains(imports, l) {
					t.Errorf("README snippet from %s's %s imports %s, which its file does not", dir, name, l)
				}
			}
			snippet = rest
		}
		if !strings.Contains("\n"+body, "\n"+snippet) {
			t.Errorf("README snippet from %s's %s is not a part of it; copy it again:\n%s", dir, name, snippet)
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
