package layers

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// rules is the import rule of each layer: a package (and everything it
// links) may not reach a forbidden path or a package below one. std marks
// packages that link the standard library (and idemq's own std-only
// packages) only.
var rules = []struct {
	pkg       string
	std       bool
	forbidden []string
}{
	{pkg: "msgkey", std: true},
	{pkg: "dedupe", std: true},
	{pkg: "idgen", std: true},
	{pkg: "idgen/cached", std: true},
	{pkg: "idgen/segment", std: true},
	{pkg: "idgen/scramble", std: true},
	{pkg: "idgen/idhttp", std: true},
	{pkg: "outbox", std: true},
	{pkg: "consumer", forbidden: []string{remoting, grpcClient, "google.golang.org/grpc", idemq + "remoting", idemq + "grpcv5", idemq + "idgen"}},
	{pkg: "remoting", forbidden: []string{grpcClient, "google.golang.org/grpc", idemq + "grpcv5", idemq + "idgen"}},
	{pkg: "grpcv5", forbidden: []string{remoting, idemq + "remoting", idemq + "idgen"}},
	{pkg: "outbox/outboxotel", forbidden: []string{remoting, grpcClient, "go.opentelemetry.io/otel/sdk"}},
	{pkg: "dedupe/redisdedupe", forbidden: []string{remoting, grpcClient, idemq + "idgen"}},
	{pkg: "dedupe/sqldedupe", forbidden: []string{"github.com/redis", remoting, grpcClient, idemq + "idgen"}},
	{pkg: "idgen/redisidgen", forbidden: []string{remoting, grpcClient, idemq + "dedupe"}},
	{pkg: "idgen/sqlidgen", forbidden: []string{"github.com/redis", remoting, grpcClient, idemq + "dedupe"}},
}

const (
	idemq      = "github.com/idemq/idemq/"
	remoting   = "github.com/apache/rocketmq-client-go"
	grpcClient = "github.com/apache/rocketmq-clients"
)

// TestImportRules holds every layer of docs/architecture.md's picture
// to its rule, so that a core never starts linking a client library and one
// client family never drags in the other.
func TestImportRules(t *testing.T) {
	for _, r := range rules {
		t.Run(r.pkg, func(t *testing.T) {
			for _, dep := range deps(t, idemq+r.pkg) {
				if r.std && !dep.Standard && !strings.HasPrefix(dep.ImportPath, idemq) {
					t.Errorf("%s links %s: it may link the standard library only", r.pkg, dep.ImportPath)
				}
				for _, f := range r.forbidden {
					if dep.ImportPath == f || strings.HasPrefix(dep.ImportPath, f+"/") {
						t.Errorf("%s links %s", r.pkg, dep.ImportPath)
					}
				}
			}
		})
	}
}

type pkg struct {
	ImportPath string
	Standard   bool
}

// deps lists what path links, path itself included, as go list sees it.
func deps(t *testing.T, path string) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Standard", path)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", path, err)
	}
	var all []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list -deps %s: %v", path, err)
		}
		all = append(all, p)
	}
	if len(all) == 0 {
		t.Fatalf("go list -deps %s listed nothing", path)
	}
	return all
}
