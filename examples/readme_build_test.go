package examples_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestREADMEProgramsBuild copies every whole program of the README, as it
// stands, into a fresh module that requires this one, as a user who starts
// from the README would, and builds them: a program that stops compiling
// (a renamed API, a missing import) fails here. The module is resolved from
// this machine's module cache with the proxy off, and its checksums are this
// module's go.sum, so no network is needed.
func TestREADMEProgramsBuild(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module example.com/readme\n\ngo 1.25.0\n\nrequire github.com/idemq/idemq v0.0.0\n\nreplace github.com/idemq/idemq => " + root + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	var sender, receiver bool
	for _, s := range readmeSnippets(t) {
		if !s.program() {
			continue
		}
		sender = sender || strings.Contains(s.code, `"github.com/idemq/idemq/producer/`)
		receiver = receiver || strings.Contains(s.code, `"github.com/idemq/idemq/consumer/`)
		pkg := filepath.Join(dir, strings.ReplaceAll(s.dir, "/", "-")+"-"+s.name)
		if err := os.Mkdir(pkg, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pkg, "main.go"), []byte(s.code), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !sender || !receiver {
		t.Fatalf("the README lacks a whole sender or receiver program (sender %v, receiver %v)", sender, receiver)
	}

	gocmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		// -mod=mod lets go fill in the requirements a user's go mod tidy
		// would add.
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s in a module of the README's programs: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	gocmd("build", "./...")
	// A user of the producer, the consumer and the Redis store requires
	// and links no container tooling.
	gomodAfter, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	linked := gocmd("list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", "./...")
	for _, m := range strings.Fields(string(gomodAfter) + "\n" + linked) {
		for _, bad := range []string{"testcontainers", "docker", "moby"} {
			if strings.Contains(m, bad) {
				t.Errorf("the README programs' module requires or links %s", m)
			}
		}
	}
}
