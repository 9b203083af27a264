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
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/idhttp"
	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/internal/testkit"
)

// BenchmarkService measures the service over loopback with a load generator
// in the same process: connections kept alive, one request at a time on each,
// from several goroutines. An op is one request. Each row takes turns, a few
// hundred requests at a time, with net/http answering a constant body of the
// same shape (bare-http: one ID; bare-http-batch1000: a batch of 1000), so
// that the machine's changing load falls on both alike and the ratio shows
// what the service adds to the HTTP stack: the route, the tag, taking the IDs
// and writing them. The segment tags are in memory: no store round trip is
// measured.
func BenchmarkService(b *testing.B) {
	src := create(b, segment.Tag{Tag: "bench", Step: 100_000})
	srv, err := idhttp.New(idhttp.Config{
		Snowflake: testkit.Generator(b, 1, idgen.Config{}),
		Segments:  src,
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	one := constant("text/plain; charset=utf-8", "1858211342319468544")
	batch := constant("application/json", `{"ids":[`+strings.Repeat(`"1858211342319468544",`, 999)+`"1858211342319468544"]}`)
	for _, bc := range []struct {
		name, path string
		ids        int
		bare       string
		peer       http.Handler
	}{
		{"idemq-single", "/api/segment/get/bench", 1, "bare-http", one},
		{"idemq-snowflake-single", "/api/snowflake/get/bench", 1, "bare-http", one},
		{"idemq-batch1000", "/api/segment/batch/bench?count=1000", 1000, "bare-http-batch1000", batch},
		{"idemq-snowflake-batch1000", "/api/snowflake/batch/bench?count=1000", 1000, "bare-http-batch1000", batch},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ours, bare := listen(b, srv, bc.path), listen(b, bc.peer, bc.path)
			var spent [2]time.Duration
			for done, round := 0, 0; done < b.N; round++ {
				n := min(loadRound, b.N-done)
				for k := range 2 {
					side := (round + k) % 2 // each goes first every other round
					spent[side] += [2]loadGen{ours, bare}[side].run(b, n, bc.ids)
				}
				done += n
			}
			b.ReportMetric(float64(spent[0].Nanoseconds())/float64(b.N), "ns/op")
			b.ReportMetric(float64(spent[1].Nanoseconds())/float64(b.N), bc.bare+"-ns/op")
			b.ReportMetric(float64(b.N)/spent[0].Seconds(), "req/s")
			b.ReportMetric(float64(b.N*bc.ids)/spent[0].Seconds(), "IDs/s")
		})
	}
}

// constant answers body.
func constant(contentType, body string) http.Handler {
	n := []string{strconv.Itoa(len(body))}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = []string{contentType}
		w.Header()["Content-Length"] = n
		io.WriteString(w, body)
	})
}

const (
	// loadConns is the load generator's connections per server, each
	// used by one goroutine at a time.
	loadConns = 4
	// loadRound is how many requests one side sends before the other's
	// turn.
	loadRound = 400
)

// loadGen is keep-alive connections to one server.
type loadGen []*loadConn

// listen serves h on a loopback listener until b ends and returns
// connections to it that request path.
func listen(b *testing.B, h http.Handler, path string) loadGen {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: h}
	go hs.Serve(ln)
	b.Cleanup(func() { hs.Close() })
	g := make(loadGen, loadConns)
	for i := range g {
		if g[i], err = dial(ln.Addr().String(), path); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { g[i].Close() })
	}
	return g
}

// run sends n requests over g's connections at once, checks that each
// answer holds ids IDs, and returns the time taken.
func (g loadGen) run(b *testing.B, n, ids int) time.Duration {
	var (
		next   atomic.Int64
		wg     sync.WaitGroup
		failed atomic.Pointer[error]
	)
	start := time.Now()
	for _, c := range g {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if err := c.do(ids); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	spent := time.Since(start)
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	return spent
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
