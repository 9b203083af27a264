package examples_test

import (
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/idemq/idemq"

// clients are the diagram's nodes outside the module: a package imports
// one when it imports its path or a package under it.
var clients = map[string]string{
	"rocketmq-client-go/v2":      "github.com/apache/rocketmq-client-go/v2",
	"rocketmq-clients/golang/v5": "github.com/apache/rocketmq-clients/golang/v5",
	"go-redis/v9":                "github.com/redis/go-redis/v9",
	"pgx/v5":                     "github.com/jackc/pgx/v5",
	"OpenTelemetry API":          "go.opentelemetry.io/otel",
}

var (
	mermaidRE = regexp.MustCompile("(?s)```mermaid\n(.*?)```")
	nodeRE    = regexp.MustCompile(`^\s*(\w+)\(?\["([^"]+)"\]\)?\s*$`)
)

// TestArchitectureDiagramMatchesImports keeps the diagram of
// docs/architecture.md true: every arrow is an import, every import between packages it draws
// is an arrow or a path of arrows, and it draws every library package
// (commands, examples, test suites and internal packages no library
// package imports are left out).
func TestArchitectureDiagramMatchesImports(t *testing.T) {
	page, err := os.ReadFile("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	m := mermaidRE.FindStringSubmatch(string(page))
	if m == nil {
		t.Fatal("docs/architecture.md has no mermaid diagram")
	}
	label := map[string]string{} // node id → label
	edges := map[string][]string{}
	for _, line := range strings.Split(m[1], "\n") {
		if n := nodeRE.FindStringSubmatch(line); n != nil {
			label[n[1]] = n[2]
			continue
		}
		if !strings.Contains(line, "-->") {
			continue
		}
		parts := strings.Split(line, "-->")
		for i := 0; i+1 < len(parts); i++ {
			for _, from := range strings.Split(parts[i], "&") {
				for _, to := range strings.Split(parts[i+1], "&") {
					from, to := strings.TrimSpace(from), strings.TrimSpace(to)
					edges[from] = append(edges[from], to)
				}
			}
		}
	}
	for from := range edges {
		if _, ok := label[from]; !ok {
			t.Errorf("the diagram's arrows leave %s, an undefined node", from)
		}
	}
	imports := moduleImports(t)

	// node returns the diagram node an import path is, if any.
	node := func(path string) (string, bool) {
		for id, l := range label {
			if p, ok := clients[l]; ok && (path == p || strings.HasPrefix(path, p+"/")) {
				return id, true
			}
			if path == module+"/"+l {
				return id, true
			}
		}
		return "", false
	}
	drawn := map[string]bool{}
	for id, l := range label {
		if _, ok := clients[l]; ok {
			continue
		}
		path := module + "/" + l
		if _, ok := imports[path]; !ok {
			t.Errorf("the diagram draws %s, which is no package of the module", l)
			continue
		}
		drawn[path] = true
		for _, to := range edges[id] {
			if _, ok := label[to]; !ok {
				t.Errorf("the diagram's arrow %s --> %s goes to an undefined node", id, to)
				continue
			}
			if !slices.ContainsFunc(imports[path], func(imp string) bool { n, ok := node(imp); return ok && n == to }) {
				t.Errorf("the diagram's arrow %s --> %s is no import", l, label[to])
			}
		}
		for _, imp := range imports[path] {
			to, ok := node(imp)
			switch {
			case ok && !reaches(edges, id, to):
				t.Errorf("%s imports %s: draw an arrow (or a path of arrows) %s --> %s", l, imp, id, to)
			case !ok && strings.HasPrefix(imp, module+"/"):
				t.Errorf("%s imports %s, which the diagram does not draw", l, strings.TrimPrefix(imp, module+"/"))
			}
		}
	}
	for path := range imports {
		rel := strings.TrimPrefix(path, module+"/")
		library := !strings.HasPrefix(rel, "cmd/") && !strings.HasPrefix(rel, "examples") &&
			!strings.HasPrefix(rel, "internal/") && !strings.HasSuffix(rel, "test")
		if library && !drawn[path] {
			t.Errorf("the diagram does not draw the library package %s", rel)
		}
	}
}

// reaches reports whether the diagram leads from one node to another.
func reaches(edges map[string][]string, from, to string) bool {
	seen := map[string]bool{}
	next := []string{from}
	for len(next) > 0 {
		n := next[len(next)-1]
		next = next[:len(next)-1]
		for _, e := range edges[n] {
			if e == to {
				return true
			}
			if !seen[e] {
				seen[e] = true
				next = append(next, e)
			}
		}
	}
	return false
}

// moduleImports returns the imports of every package of the module's
// non-test files, by import path.
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	pkgs := map[string][]string{}
	err := filepath.WalkDir("..", func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if dir != ".." {
			if name := d.Name(); strings.HasPrefix(name, ".") || name == "testdata" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return filepath.SkipDir // another module (bench/)
			}
		}
		p, err := build.ImportDir(dir, 0)
		if err != nil {
			if _, ok := err.(*build.NoGoError); ok {
				return nil
			}
			return err
		}
		rel, err := filepath.Rel("..", dir)
		if err != nil {
			return err
		}
		path := module
		if rel != "." {
			path += "/" + filepath.ToSlash(rel)
		}
		pkgs[path] = p.Imports
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}
