package idhttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/idhttp"
	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/internal/memidgen"
	"github.com/idemq/idemq/internal/testenv"
)

func TestMain(m *testing.M) {
	code := testenv.Run(m)
	// Every Server the tests made was closed: its allocators' goroutines
	// must have stopped.
	if err := goleak.Find(); code == 0 && err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		code = 1
	}
	os.Exit(code)
}

// faulty is a real source that fails every call while down, as an
// unreachable server does, and counts the calls.
type faulty struct {
	segment.Store
	down  atomic.Bool
	calls atomic.Int64
}

var errDown = errors.New("test: source unreachable")

func (f *faulty) NextSegment(ctx context.Context, tag string, step int64) (segment.Segment, error) {
	f.calls.Add(1)
	if f.down.Load() {
		return segment.Segment{}, errDown
	}
	return f.Store.NextSegment(ctx, tag, step)
}

// serve starts srv on a loopback listener, stopped and closed when t ends.
func serve(t testing.TB, srv *idhttp.Server) client {
	t.Helper()
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
	})
	return client{t, hs.URL, hs.Client()}
}

func newServer(t testing.TB, cfg idhttp.Config) (*idhttp.Server, client) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	srv, err := idhttp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return srv, serve(t, srv)
}

type client struct {
	t    testing.TB
	base string
	c    *http.Client
}

// get returns path's status and body.
func (c client) get(path string) (int, []byte) {
	c.t.Helper()
	resp, err := c.c.Get(c.base + path)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	if got := resp.Header.Get("Cache-Control"); got != "no-store" {
		c.t.Errorf("GET %s: Cache-Control %q, want no-store", path, got)
	}
	return resp.StatusCode, body
}

// id takes one ID from path, which must answer 200.
func (c client) id(path string) idgen.ID {
	c.t.Helper()
	status, body := c.get(path)
	if status != http.StatusOK {
		c.t.Fatalf("GET %s: %d %s", path, status, body)
	}
	id, err := idgen.Parse(string(body))
	if err != nil {
		c.t.Fatalf("GET %s: %v", path, err)
	}
	return id
}

// batch is a batch's answer.
type batch struct {
	IDs   []idgen.ID `json:"ids"`
	Error string     `json:"error"`
	Code  string     `json:"code"`
}

// batch takes a batch from path, which must answer 200.
func (c client) batch(path string) batch {
	c.t.Helper()
	status, body := c.get(path)
	if status != http.StatusOK {
		c.t.Fatalf("GET %s: %d %s", path, status, body)
	}
	var b batch
	if err := json.Unmarshal(body, &b); err != nil {
		c.t.Fatalf("GET %s: %v in %s", path, err, body)
	}
	return b
}

// failure is an error's answer.
type failure struct {
	Status int
	Error  string `json:"error"`
	Code   string `json:"code"`
}

// fail requests path, which must answer an error.
func (c client) fail(path string) failure {
	c.t.Helper()
	status, body := c.get(path)
	f := failure{Status: status}
	if err := json.Unmarshal(body, &f); err != nil || f.Error == "" || f.Code == "" {
		c.t.Fatalf("GET %s: %d %s, want a JSON error (%v)", path, status, body, err)
	}
	return f
}

// create returns an in-memory source holding tags.
func create(t testing.TB, tags ...segment.Tag) *memidgen.Segments {
	t.Helper()
	src := memidgen.NewSegments()
	for _, tg := range tags {
		if err := src.CreateTag(context.Background(), tg); err != nil {
			t.Fatal(err)
		}
	}
	return src
}
