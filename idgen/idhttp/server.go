package idhttp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/internal/segtag"
)

// Defaults of Config.
const (
	defaultMaxBatch    = 1000
	defaultNegativeTTL = time.Second
	// maxMaxBatch bounds Config.MaxBatch: a batch is one response body
	// of up to 22 bytes per ID, built in memory.
	maxMaxBatch = 1 << 20
)

// Config configures a Server. At least one of Snowflake and Segments is
// required; the zero value of every other field works.
type Config struct {
	// Snowflake issues the IDs of /api/snowflake/… and its layout decodes
	// them. The Server never closes it. Nil: those endpoints answer
	// not_served.
	Snowflake *idgen.Generator
	// Segments is the source of the tags of /api/segment/…. Nil: those
	// endpoints answer not_served.
	Segments segment.Store
	// Segment configures every tag's allocator; its LoadTimeout also
	// bounds the load of a tag's first segment, which the tag's first
	// request waits for. Its Logger defaults to Logger here.
	Segment segment.Config
	// MaxBatch is the largest count a batch request may ask for. Default
	// 1000; at most 1,048,576.
	MaxBatch int
	// NegativeTTL is how long a tag the source does not hold, or holds at
	// its maximum, is answered without asking the source again: a client
	// asking again and again costs the source one call per NegativeTTL,
	// and a tag created meanwhile is served after at most that long. A
	// source that cannot be reached is not remembered. Default 1s.
	NegativeTTL time.Duration
	// Logger reports tags served and loads that fail; requests are not
	// logged. Default slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.MaxBatch == 0 {
		c.MaxBatch = defaultMaxBatch
	}
	if c.NegativeTTL == 0 {
		c.NegativeTTL = defaultNegativeTTL
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Segment.Logger == nil {
		c.Segment.Logger = c.Logger
	}
}

// validate reports whether c can make a Server, after defaults.
func (c Config) validate() error {
	switch {
	case c.Snowflake == nil && c.Segments == nil:
		return fmt.Errorf("%w: nothing to serve: set Snowflake, Segments or both", idgen.ErrInvalidConfig)
	case c.MaxBatch < 1 || c.MaxBatch > maxMaxBatch:
		return fmt.Errorf("%w: MaxBatch %d is outside 1..%d", idgen.ErrInvalidConfig, c.MaxBatch, maxMaxBatch)
	case c.NegativeTTL < 0:
		return fmt.Errorf("%w: negative NegativeTTL %v", idgen.ErrInvalidConfig, c.NegativeTTL)
	}
	if err := c.Segment.Validate(); err != nil {
		return fmt.Errorf("%w: Segment: %w", idgen.ErrInvalidConfig, err)
	}
	return nil
}

// A Server answers the endpoints of the package documentation. It is an
// http.Handler, safe for concurrent use; Close closes the tags' allocators.
// Every endpoint answers GET; /healthz, /metrics and decode answer HEAD too,
// while the others refuse it (bad_method): its answer has no body, so the
// IDs would be lost. Every answer carries Cache-Control: no-store.
//
// A request that fails issues no ID and answers {"error":"…","code":"…"}
// with one of these codes:
//
//	400 bad_count           count missing, not a number, or outside 1..MaxBatch
//	400 bad_id              the ID to decode is not a decimal ID
//	400 bad_tag             a tag longer than 128 bytes (Leaf's biz_tag column)
//	404 unknown_tag         the source holds no such tag
//	404 not_served          snowflake or segment IDs are not configured here
//	405 bad_method          HEAD of an endpoint that issues IDs
//	409 max_reached         the tag reached its maximum: raise it (`idemq segment set-max`)
//	503 source_unavailable  the segment source cannot be reached and no reserved ID is left
//	503 lease_expired       the generator cannot prove its worker lease live
//	503 clock_backwards     the clock stands behind the last ID and the policy refuses
//	503 unavailable         any other reason the generator cannot issue (closed, layout exhausted)
//	503 closing             the server is shutting down
//
// max_reached is 409 rather than 410: the state ends when an operator raises
// the maximum, and a 410 is cacheable by default. A batch cut short by the
// tag's maximum or by the source (some IDs taken, then the error) answers
// 200 with the IDs it holds and the error's code beside them,
// {"ids":[…],"error":"…","code":"max_reached"}, rather than throwing
// reserved IDs away: check len(ids).
//
// A tag's allocator is made on the first request for it, loading the tag's
// first segment; concurrent first requests wait for the same load. Later
// requests take IDs from memory while the allocator loads the next segment
// in the background (Leaf's double buffer).
//
// /healthz answers 503 when the generator cannot issue an ID (it takes one
// to find out; IDs are not scarce) or when a tag's allocator has no ID left
// and its last load failed. It answers 200 but lists the problem for a tag
// whose loads fail while IDs are left, and for a tag at its maximum: every
// replica shares that, and taking them all out of a load balancer would not
// help. /metrics counts requests and IDs issued per endpoint and errors per
// code (the {key} is not a label, so callers cannot grow the metrics), and
// shows every served tag's allocator statistics: step, segments loaded,
// load failures, IDs left, IDs issued.
type Server struct {
	gen      *idgen.Generator
	tags     *tags // nil without a source
	maxBatch int
	mux      *http.ServeMux
	stats    stats
	closing  atomic.Bool
	idsPool  sync.Pool // *[]idgen.ID of MaxBatch, for snowflake batches
	segPool  sync.Pool // *[]int64 of MaxBatch, for segment batches
	closeErr error
	once     sync.Once
}

// New returns a Server. It loads nothing: a tag's allocator is made on the
// tag's first request. Errors wrap [idgen.ErrInvalidConfig].
func New(cfg Config) (*Server, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{gen: cfg.Snowflake, maxBatch: cfg.MaxBatch, mux: http.NewServeMux()}
	if cfg.Segments != nil {
		s.tags = newTags(cfg.Segments, cfg)
	}
	s.idsPool.New = func() any { ids := make([]idgen.ID, s.maxBatch); return &ids }
	s.segPool.New = func() any { ids := make([]int64, s.maxBatch); return &ids }
	s.handle("GET /api/snowflake/get/{key}", epSnowflakeGet, s.snowflakeGet)
	s.handle("GET /api/snowflake/batch/{key}", epSnowflakeBatch, s.snowflakeBatch)
	s.handle("GET /api/snowflake/decode/{id}", epSnowflakeDecode, s.snowflakeDecode)
	s.handle("GET /api/segment/get/{tag}", epSegmentGet, s.segmentGet)
	s.handle("GET /api/segment/batch/{tag}", epSegmentBatch, s.segmentBatch)
	s.handle("GET /healthz", epHealth, s.health)
	s.handle("GET /metrics", epMetrics, s.metrics)
	return s, nil
}

// handle routes pattern to h, counting its requests as ep's.
func (s *Server) handle(pattern string, ep endpoint, h http.HandlerFunc) {
	issues := ep == epSnowflakeGet || ep == epSnowflakeBatch || ep == epSegmentGet || ep == epSegmentBatch
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		s.stats.requests[ep].Add(1)
		if issues && r.Method == http.MethodHead {
			// A GET pattern matches HEAD too, whose answer has no
			// body: the IDs would be issued and lost.
			w.Header()["Allow"] = allowGet
			s.fail(w, codeBadMethod, errHead)
			return
		}
		h(w, r)
	})
}

var (
	allowGet = []string{"GET"}
	errHead  = errors.New("idhttp: HEAD would issue IDs and drop them: use GET")
)

// ServeHTTP answers r.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Every answer, the mux's 404 and 405 included, is for this request
	// only: an ID served from a cache would be served twice.
	w.Header()["Cache-Control"] = noStore
	s.mux.ServeHTTP(w, r)
}

// Close makes every request answer closing and closes the tags'
// allocators, waiting for their loads to stop. It does not close the
// Snowflake generator. Stop the http.Server first (Shutdown), so that no
// request is cut short. Close is safe to call more than once.
func (s *Server) Close() error {
	s.once.Do(func() {
		s.closing.Store(true)
		if s.tags != nil {
			s.closeErr = s.tags.close()
		}
	})
	return s.closeErr
}

// fail answers an error and counts it.
func (s *Server) fail(w http.ResponseWriter, c code, err error) {
	s.stats.errors[c].Add(1)
	writeError(w, c, err)
}

var (
	errNoSnowflake = errors.New("idhttp: snowflake IDs are not served here")
	errNoSegments  = errors.New("idhttp: segment IDs are not served here")
)

func (s *Server) snowflake(w http.ResponseWriter) bool {
	switch {
	case s.closing.Load():
		s.fail(w, codeClosing, errClosing)
	case s.gen == nil:
		s.fail(w, codeNotServed, errNoSnowflake)
	default:
		return true
	}
	return false
}

func (s *Server) snowflakeGet(w http.ResponseWriter, r *http.Request) {
	if !s.snowflake(w) {
		return
	}
	id, err := s.gen.Next(r.Context())
	if err != nil {
		s.fail(w, snowflakeCode(err), err)
		return
	}
	s.stats.issued[epSnowflakeGet].Add(1)
	writeID(w, id)
}

func (s *Server) snowflakeBatch(w http.ResponseWriter, r *http.Request) {
	if !s.snowflake(w) {
		return
	}
	n, ok := s.count(w, r)
	if !ok {
		return
	}
	batch(s, w, r, epSnowflakeBatch, n, &s.idsPool, s.gen.Fill, snowflakeCode, nil)
}

// batch fills n IDs with fill, in a slice from pool, and answers them.
func batch[T ~int64](s *Server, w http.ResponseWriter, r *http.Request, ep endpoint, n int, pool *sync.Pool,
	fill func(context.Context, []T) (int, error), sort func(error) code, tg *tag) {
	p := pool.Get().(*[]T)
	defer pool.Put(p)
	got, err := fill(r.Context(), (*p)[:n])
	s.stats.issued[ep].Add(int64(got))
	if tg != nil {
		tg.issued.Add(int64(got))
	}
	if err != nil && got == 0 {
		s.fail(w, sort(err), err)
		return
	}
	c := code(0)
	if err != nil {
		c = sort(err)
		s.stats.errors[c].Add(1)
	}
	writeIDs(w, (*p)[:got], c, err)
}

// count reads the query's count, 1 to MaxBatch.
func (s *Server) count(w http.ResponseWriter, r *http.Request) (int, bool) {
	v, ok := queryValue(r.URL.RawQuery, "count")
	n, err := strconv.Atoi(v)
	switch {
	case !ok:
		s.fail(w, codeBadCount, fmt.Errorf("idhttp: count is missing: add ?count=N, N from 1 to %d", s.maxBatch))
	case err != nil || n < 1 || n > s.maxBatch:
		s.fail(w, codeBadCount, fmt.Errorf("idhttp: count %q is not a number from 1 to %d", v, s.maxBatch))
	default:
		return n, true
	}
	return 0, false
}

// queryValue finds key's first value in a raw query without building the
// map url.Query would; count is a number, so it needs no unescaping.
func queryValue(q, key string) (string, bool) {
	for q != "" {
		var kv string
		kv, q, _ = strings.Cut(q, "&")
		if k, v, _ := strings.Cut(kv, "="); k == key {
			return v, true
		}
	}
	return "", false
}

func (s *Server) snowflakeDecode(w http.ResponseWriter, r *http.Request) {
	if !s.snowflake(w) {
		return
	}
	id, err := idgen.Parse(r.PathValue("id"))
	if err != nil {
		s.fail(w, codeBadID, err)
		return
	}
	l := s.gen.Config().Layout
	p := l.Decode(id)
	buf := buffers.Get().(*buffer)
	b := append(buf.b[:0], `{"id":"`...)
	b = strconv.AppendInt(b, int64(id), 10)
	b = append(b, `","layout":`...)
	b = appendString(b, l.Name)
	b = append(b, `,"time":"`...)
	b = p.Time.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	b = append(b, `","tick":`...)
	b = strconv.AppendInt(b, p.Tick, 10)
	for _, f := range [...]struct {
		name string
		v    int64
	}{{"node", p.Node}, {"datacenter", p.Datacenter}, {"worker", p.Worker}, {"generation", p.Generation}, {"sequence", p.Sequence}} {
		b = append(b, `,"`...)
		b = append(b, f.name...)
		b = append(b, `":`...)
		b = strconv.AppendInt(b, f.v, 10)
	}
	buf.b = append(b, '}')
	writeBody(w, http.StatusOK, appJSON, buf)
}

// segmentTag finds the request's tag, or answers why not.
func (s *Server) segmentTag(w http.ResponseWriter, r *http.Request) (*tag, bool) {
	name := r.PathValue("tag")
	switch {
	case s.closing.Load():
		s.fail(w, codeClosing, errClosing)
	case s.tags == nil:
		s.fail(w, codeNotServed, errNoSegments)
	case len(name) > segtag.MaxLen:
		s.fail(w, codeBadTag, fmt.Errorf("idhttp: tag of %d bytes is longer than %d", len(name), segtag.MaxLen))
	default:
		tg, err := s.tags.get(r.Context(), name)
		if err != nil {
			s.fail(w, segmentCode(err), err)
			return nil, false
		}
		return tg, true
	}
	return nil, false
}

func (s *Server) segmentGet(w http.ResponseWriter, r *http.Request) {
	tg, ok := s.segmentTag(w, r)
	if !ok {
		return
	}
	id, err := tg.alloc.Next(r.Context())
	if err != nil {
		s.fail(w, segmentCode(err), err)
		return
	}
	s.stats.issued[epSegmentGet].Add(1)
	tg.issued.Add(1)
	writeID(w, id)
}

func (s *Server) segmentBatch(w http.ResponseWriter, r *http.Request) {
	n, ok := s.count(w, r)
	if !ok {
		return
	}
	tg, ok := s.segmentTag(w, r)
	if !ok {
		return
	}
	batch(s, w, r, epSegmentBatch, n, &s.segPool, tg.alloc.Fill, segmentCode, tg)
}
