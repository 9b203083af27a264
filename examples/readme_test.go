package examples_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// snippetRE finds the README's Go blocks that say which Example they come
// from: "from `<package dir>`'s `<Example>`", then the block.
var snippetRE = regexp.MustCompile("(?s)from\\s+`([^`]+)`'s `(Example[^`]*)`[^`]*?```go\n(.*?)```")

// TestREADMESnippetsAreExamples keeps the README's snippets in step with
// the compiled, tested Example functions they are cut from: each must be a
// run of whole lines of its Example's body.
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
		body := exampleBody(t, filepath.Join("..", dir), name)
		if !strings.Contains("\n"+body, "\n"+snippet) {
			t.Errorf("README snippet from %s's %s is not a part of it; copy it again:\n%s", dir, name, snippet)
		}
	}
}

// exampleBody returns the body of func name in dir's test files, one tab
// of indentation removed.
func exampleBody(t *testing.T, dir, name string) string {
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
		body, _, _ := strings.Cut(rest, "\n}\n")
		lines := strings.Split(body, "\n")
		for i, l := range lines {
			lines[i] = strings.TrimPrefix(l, "\t")
		}
		return strings.Join(lines, "\n") + "\n"
	}
	t.Fatalf("no func %s in %s", name, dir)
	return ""
}
