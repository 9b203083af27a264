package idhttp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemq/idemq/idgen/segment"
)

// tag is a served tag's allocator and what the server counts of it.
type tag struct {
	name   string
	alloc  *segment.Allocator
	issued atomic.Int64
}

// tags makes and keeps one allocator per tag. Served tags are found without
// a lock in a map replaced, never changed, when a tag is added; the rest —
// loads under way, tags found missing — is under mu.
type tags struct {
	src         segment.Store
	cfg         segment.Config
	negativeTTL time.Duration
	log         *slog.Logger
	now         func() time.Time

	served atomic.Pointer[map[string]*tag]

	ctx    context.Context // ends on close, and with it every load
	cancel context.CancelFunc
	wg     sync.WaitGroup // loads under way

	mu      sync.Mutex
	closed  bool
	loading map[string]*load
	missing map[string]negative
}

// load is a tag's first segment on its way: every request for the tag waits
// for the same one.
type load struct {
	done chan struct{}
	tag  *tag
	err  error
}

// negative is a tag the source said it does not hold or cannot extend.
type negative struct {
	err   error
	until time.Time
}

// maxMissing bounds the tags remembered as missing, which callers choose.
const maxMissing = 4096

func newTags(src segment.Store, cfg Config) *tags {
	ctx, cancel := context.WithCancel(context.Background())
	t := &tags{
		src: src, cfg: cfg.Segment, negativeTTL: cfg.NegativeTTL,
		log: cfg.Logger, now: time.Now, ctx: ctx, cancel: cancel,
		loading: map[string]*load{}, missing: map[string]negative{},
	}
	t.served.Store(&map[string]*tag{})
	return t
}

// get returns name's allocator, making it on the tag's first request.
func (t *tags) get(ctx context.Context, name string) (*tag, error) {
	if tg := (*t.served.Load())[name]; tg != nil {
		return tg, nil
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, errClosing
	}
	if tg := (*t.served.Load())[name]; tg != nil {
		t.mu.Unlock()
		return tg, nil
	}
	if n, ok := t.missing[name]; ok {
		if t.now().Before(n.until) {
			t.mu.Unlock()
			return nil, n.err
		}
		delete(t.missing, name)
	}
	l := t.loading[name]
	if l == nil {
		l = &load{done: make(chan struct{})}
		t.loading[name] = l
		t.wg.Add(1)
		go t.load(name, l)
	}
	t.mu.Unlock()
	select {
	case <-l.done:
		return l.tag, l.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// load makes name's allocator, detached from the request that asked for it:
// others may be waiting for the same load.
func (t *tags) load(name string, l *load) {
	defer t.wg.Done()
	a, err := segment.New(t.ctx, t.src, name, t.cfg)

	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.loading, name)
	switch {
	case err == nil && t.closed:
		a.Close()
		l.err = errClosing
	case err == nil:
		l.tag = &tag{name: name, alloc: a}
		m := maps.Clone(*t.served.Load())
		m[name] = l.tag
		t.served.Store(&m)
		t.log.Info("idhttp: serving segment tag", "tag", name)
	case errors.Is(err, segment.ErrUnknownTag), errors.Is(err, segment.ErrMaxReached):
		l.err = err
		if len(t.missing) >= maxMissing {
			clear(t.missing)
		}
		t.missing[name] = negative{err, t.now().Add(t.negativeTTL)}
	default:
		l.err = fmt.Errorf("idhttp: load the first segment of tag %q: %w", name, err)
		if t.closed {
			l.err = errClosing
		} else {
			t.log.Warn("idhttp: cannot load a segment tag", "tag", name, "err", err)
		}
	}
	close(l.done)
}

// list returns the served tags.
func (t *tags) list() map[string]*tag { return *t.served.Load() }

// close ends the loads under way and closes every allocator.
func (t *tags) close() error {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.cancel()
	t.wg.Wait()
	var errs []error
	for _, tg := range t.list() {
		if err := tg.alloc.Close(); err != nil {
			errs = append(errs, fmt.Errorf("idhttp: close tag %q: %w", tg.name, err))
		}
	}
	return errors.Join(errs...)
}
