package testenv

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// DropProxy forwards TCP connections to a server. Once armed with a marker,
// it lets the next request holding that marker through, swallows the reply
// and closes the connection: a network failure after the server did the
// work, which the client sees as an error of unknown outcome and, like
// go-redis, may send again on a new connection. It suits protocols with one
// request in flight per connection (Redis without pipelining).
type DropProxy struct {
	ln      net.Listener
	target  string
	marker  atomic.Pointer[[]byte]
	dropped atomic.Int32
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   []net.Conn
}

// StartDropProxy starts a DropProxy to target, stopped when tb ends.
func StartDropProxy(tb testing.TB, target string) *DropProxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &DropProxy{ln: ln, target: target}
	p.wg.Go(p.serve)
	tb.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

// Addr is the address clients dial.
func (p *DropProxy) Addr() string { return p.ln.Addr().String() }

// Arm makes the proxy drop the reply to the next request that holds marker
// (compared without case).
func (p *DropProxy) Arm(marker string) {
	m := bytes.ToLower([]byte(marker))
	p.marker.Store(&m)
}

// Dropped counts the replies dropped so far.
func (p *DropProxy) Dropped() int { return int(p.dropped.Load()) }

func (p *DropProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		var drop atomic.Bool
		p.wg.Go(func() {
			defer s.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := c.Read(buf)
				if err != nil {
					return
				}
				// One request is in flight at a time: the next reply
				// answers this one.
				if m := p.marker.Load(); m != nil && bytes.Contains(bytes.ToLower(buf[:n]), *m) && p.marker.CompareAndSwap(m, nil) {
					drop.Store(true)
				}
				if _, err := s.Write(buf[:n]); err != nil {
					return
				}
			}
		})
		p.wg.Go(func() {
			defer c.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := s.Read(buf)
				if err != nil {
					return
				}
				if drop.Load() {
					p.dropped.Add(1)
					s.Close()
					return
				}
				if _, err := c.Write(buf[:n]); err != nil {
					return
				}
			}
		})
	}
}
