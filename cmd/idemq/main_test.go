package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/idemq/idemq/internal/testenv"
)

// binDir holds the binary the tests build, once per test binary.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "idemq-cli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := testenv.Run(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary returns the path of the idemq binary, built from this package on
// first use.
func binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binPath = filepath.Join(binDir, "idemq")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// result is what a run of the command printed and its exit status.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// idemq runs the built binary with args and the environment variables env
// ("K=V"); IDEMQ_STORE is unset unless env sets it.
func idemq(t testing.TB, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, storeEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("idemq %q: %v", args, err)
	}
	return r
}

// inProcess runs args through run, with stdin.
func inProcess(t testing.TB, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return result{out.String(), errb.String(), code}
}

// mustJSON decodes r's stdout into v, failing t unless the run succeeded.
func mustJSON(t testing.TB, r result, v any) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("want exit 0, got %v", r)
	}
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("stdout is not the JSON document wanted: %v\n%v", err, r)
	}
	if dec.More() {
		t.Fatalf("stdout holds more than one JSON document:\n%v", r)
	}
}

// wantFail checks that r exited with code and that its stderr holds every
// one of msgs, and names no package twice.
func wantFail(t testing.TB, r result, code int, msgs ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit %d, got %v", code, r)
	}
	for _, m := range msgs {
		if !strings.Contains(r.stderr, m) {
			t.Errorf("stderr lacks %q:\n%s", m, r.stderr)
		}
	}
	if p := doubledPrefix(r.stderr); p != "" {
		t.Errorf("stderr names %q twice; wrap a package's own sentinel without its prefix again:\n%s", p, r.stderr)
	}
}

// prefixRE finds the package prefixes of the errors the command prints.
var prefixRE = regexp.MustCompile(`\b(dedupe|redisdedupe|sqldedupe|memdedupe|idgen|redisidgen|sqlidgen|memidgen|segment|cached|scramble|idhttp|msgkey|sqldialect): `)

// doubledPrefix returns a package prefix that one line of stderr holds
// twice ("redisidgen: list pool: redisidgen: no such pool"), or "".
func doubledPrefix(stderr string) string {
	for _, line := range strings.Split(stderr, "\n") {
		seen := map[string]bool{}
		for _, m := range prefixRE.FindAllStringSubmatch(line, -1) {
			if seen[m[1]] {
				return m[1]
			}
			seen[m[1]] = true
		}
	}
	return ""
}

// A backend is a real store and the URL the command takes for it.
type backend struct {
	name string
	// url returns the URL of an empty database (a shared server for Redis:
	// tests use names of their own there).
	url func(testing.TB) string
}

var (
	redisBackend  = backend{"Redis", func(t testing.TB) string { return "redis://" + testenv.Redis(t) + "/0" }}
	sqliteBackend = backend{"SQLite", func(t testing.TB) string {
		return "sqlite://" + filepath.Join(t.TempDir(), "store.db")
	}}
	mysqlBackend    = backend{"MySQL", mysqlURL}
	postgresBackend = backend{"Postgres", func(t testing.TB) string { return testenv.Postgres(t) }}
	backends        = []backend{redisBackend, sqliteBackend, mysqlBackend, postgresBackend}
)

// mysqlURL is testenv's MySQL DSN as a mysql:// URL.
func mysqlURL(t testing.TB) string {
	cfg, err := mysql.ParseDSN(testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	u := url.URL{Scheme: "mysql", User: url.UserPassword(cfg.User, cfg.Passwd), Host: cfg.Addr, Path: "/" + cfg.DBName}
	if cfg.Passwd == "" {
		u.User = url.User(cfg.User)
	}
	return u.String()
}

var names atomic.Int64

// unique returns a name no other test of this run uses, for pools, groups
// and tags on the shared Redis.
func unique(base string) string {
	return fmt.Sprintf("%s-%d-%d", base, os.Getpid(), names.Add(1))
}
