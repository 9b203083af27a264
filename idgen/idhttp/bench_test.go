package idhttp_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/idhttp"
	"github.com/idemq/idemq/idgen/memidgen"
)

// BenchmarkService measures the service over loopback with a load generator
// in the same process: connections kept alive, one request at a time on each,
// from several goroutines. An op is one request. bare-http is net/http
// answering a constant ID-sized body, so the ratios show what the service adds
// to the HTTP stack: finding the route, the tag, taking the IDs, writing them.
// The segment tags are in memory, so that no store round trip is measured.
func BenchmarkService(b *testing.B) {
	src := memidgen.NewSegments()
	create(b, src, idgen.SegmentTag{Tag: "bench", Step: 100_000})
	srv, err := idhttp.New(idhttp.Config{
		Snowflake: newGenerator(b, 1),
		Segments:  src,
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	bare := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = []string{"text/plain; charset=utf-8"}
		io.WriteString(w, "1858211342319468544")
	})
	for _, bc := range []struct {
		name string
		h    http.Handler
		path string
		ids  int
	}{
		{"bare-http", bare, "/api/segment/get/bench", 1},
		{"idemq-single", srv, "/api/segment/get/bench", 1},
		{"idemq-snowflake-single", srv, "/api/snowflake/get/bench", 1},
		{"idemq-batch1000", srv, "/api/segment/batch/bench?count=1000", 1000},
		{"idemq-snowflake-batch1000", srv, "/api/snowflake/batch/bench?count=1000", 1000},
	} {
		b.Run(bc.name, func(b *testing.B) { load(b, bc.h, bc.path, bc.ids) })
	}
}

// loadConns is the load generator's connections, each used by one
// goroutine.
const loadConns = 8

// load serves h on a loopback listener and requests path b.N times over
// loadConns connections, checking every answer.
func load(b *testing.B, h http.Handler, path string, ids int) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: h}
	go hs.Serve(ln)
	defer hs.Close()

	conns := make([]*loadConn, loadConns)
	for i := range conns {
		if conns[i], err = dial(ln.Addr().String(), path); err != nil {
			b.Fatal(err)
		}
		defer conns[i].Close()
	}
	var (
		next   atomic.Int64
		wg     sync.WaitGroup
		failed atomic.Pointer[error]
	)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for _, c := range conns {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := c.do(ids); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(b.N)*float64(ids)/elapsed.Seconds(), "IDs/s")
}

// loadConn is a keep-alive HTTP/1.1 client connection. It writes requests
// and reads answers by hand, as wrk does: net/http's client spends about as
// much CPU per request as its server, and on a small machine the benchmark
// would measure the client.
type loadConn struct {
	net.Conn
	r   *bufio.Reader
	req []byte
}

func dial(addr, path string) (*loadConn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	req := fmt.Appendf(nil, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, addr)
	return &loadConn{c, bufio.NewReaderSize(c, 64<<10), req}, nil
}

// do sends the request and reads its answer, which must be 200 with ids
// IDs: one in decimal, or a JSON batch of ids.
func (c *loadConn) do(ids int) error {
	if _, err := c.Write(c.req); err != nil {
		return err
	}
	status, err := c.r.ReadSlice('\n')
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(status, []byte("HTTP/1.1 200 ")) {
		return fmt.Errorf("answer %q", status)
	}
	n := -1
	for {
		line, err := c.r.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) <= 2 {
			break
		}
		if v, ok := bytes.CutPrefix(line, []byte("Content-Length: ")); ok {
			if n, err = strconv.Atoi(string(bytes.TrimSpace(v))); err != nil {
				return err
			}
		}
	}
	if n < 0 {
		return fmt.Errorf("answer without Content-Length")
	}
	body, err := c.r.Peek(n)
	if err != nil {
		return err
	}
	got := 1
	if body[0] == '{' {
		got = bytes.Count(body, []byte{','}) + 1
	} else if _, err := idgen.Parse(string(body)); err != nil {
		return err
	}
	if got != ids {
		return fmt.Errorf("%d IDs in %q, want %d", got, body, ids)
	}
	_, err = c.r.Discard(n)
	return err
}
