package examples_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// clientFamilies are the client families idemq adapts, each with the
// packages a user of it imports (its adapters beside the client-neutral
// core) and the module path prefixes of its client library.
var clientFamilies = []struct {
	name    string
	imports []string
	client  string
}{
	{"rocketmq", []string{"github.com/idemq/idemq/remoting", "github.com/idemq/idemq/grpcv5"}, "github.com/apache/rocketmq-"},
	{"kafka", []string{"github.com/idemq/idemq/kafka"}, "github.com/twmb/franz-go"},
	{"nats", []string{"github.com/idemq/idemq/natsjs"}, "github.com/nats-io/"},
}

// adapterModules are the modules of this repository a user may require
// beside idemq's own, by directory: each client family but RocketMQ's
// has its adapter in a module of its own, so that its client stays out of
// the other families' module graphs.
var adapterModules = []string{"kafka", "natsjs"}

// TestAdapterModulesIsolated builds, for each client family, a user's
// module that imports its adapters and the core (consumer, the Redis and
// SQL stores, the outbox, the worker-id leases), runs go mod tidy in it
// as its user would, and checks its go.sum: it holds the family's client
// and no line of another family's client. go mod tidy records the
// checksums of what the imported packages' tests import too, so a core
// package whose test imported a client would fail this.
func TestAdapterModulesIsolated(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range clientFamilies {
		t.Run(fam.name, func(t *testing.T) {
			t.Parallel()
			dir := userModule(t, root, "example.com/"+fam.name+"user", "go 1.25.0\n")
			imports := append([]string{
				"github.com/idemq/idemq/consumer",
				"github.com/idemq/idemq/dedupe/redisdedupe",
				"github.com/idemq/idemq/dedupe/sqldedupe",
				"github.com/idemq/idemq/outbox",
				"github.com/idemq/idemq/idgen/redisidgen",
			}, fam.imports...)
			var src strings.Builder
			src.WriteString("package main\n\nimport (\n")
			for _, imp := range imports {
				src.WriteString("\t_ \"" + imp + "\"\n")
			}
			src.WriteString(")\n\nfunc main() {}\n")
			if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			goIn(t, dir, "mod", "tidy")
			sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(string(sum), "\n")
			has := func(prefix string) (n int) {
				for _, l := range lines {
					if strings.HasPrefix(l, prefix) {
						n++
					}
				}
				return n
			}
			if has(fam.client) == 0 {
				t.Errorf("go.sum of a %s user holds no line of %s*", fam.name, fam.client)
			}
			for _, other := range clientFamilies {
				if other.name != fam.name {
					if n := has(other.client); n > 0 {
						t.Errorf("go.sum of a %s user holds %d lines of %s's client (%s*); go mod why -m shows the path", fam.name, n, other.name, other.client)
					}
				}
			}
		})
	}
}

// userModule writes the go.mod of a fresh module named path, its lines
// header (a go directive, requirements) and then a requirement of idemq
// and each of its adapter modules as they stand in the repository at
// root, and returns its directory. Its go.sum is the union of theirs, so that
// go resolves it from this machine's module cache with the proxy off (see
// goIn); go mod tidy then keeps only what the module needs.
func userModule(t *testing.T, root, path, header string) string {
	t.Helper()
	dir := t.TempDir()
	gomod := "module " + path + "\n\n" + header + "\nrequire github.com/idemq/idemq v0.0.0\n\nreplace github.com/idemq/idemq => " + root + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range adapterModules {
		gomod += "\nrequire github.com/idemq/idemq/" + m + " v0.0.0\n\nreplace github.com/idemq/idemq/" + m + " => " + filepath.Join(root, m) + "\n"
		s, err := os.ReadFile(filepath.Join(root, m, "go.sum"))
		if err != nil {
			t.Fatal(err)
		}
		sum = append(sum, s...)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
