package idhttp

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/idemq/idemq/idgen/segment"
)

// endpoint is a route, as the metrics label it.
type endpoint int

const (
	epSnowflakeGet endpoint = iota
	epSnowflakeBatch
	epSnowflakeDecode
	epSegmentGet
	epSegmentBatch
	epHealth
	epMetrics
	numEndpoints
)

var endpointNames = [numEndpoints]string{
	epSnowflakeGet:    "snowflake_get",
	epSnowflakeBatch:  "snowflake_batch",
	epSnowflakeDecode: "snowflake_decode",
	epSegmentGet:      "segment_get",
	epSegmentBatch:    "segment_batch",
	epHealth:          "healthz",
	epMetrics:         "metrics",
}

// stats are the server's counters: fixed arrays, so a request adds to one
// without a lock or a map.
type stats struct {
	requests [numEndpoints]atomic.Int64
	issued   [numEndpoints]atomic.Int64
	errors   [numCodes]atomic.Int64
}

// metrics answers the counters and every tag's allocator statistics in
// Prometheus' text format (version 0.0.4).
func (s *Server) metrics(w http.ResponseWriter, _ *http.Request) {
	buf := buffers.Get().(*buffer)
	b := buf.b[:0]
	b = help(b, "idemq_http_requests_total", "counter", "Requests received, by endpoint.")
	for ep := range numEndpoints {
		b = sample(b, "idemq_http_requests_total", "endpoint", endpointNames[ep], s.stats.requests[ep].Load())
	}
	b = help(b, "idemq_ids_issued_total", "counter", "IDs issued, by endpoint.")
	for _, ep := range [...]endpoint{epSnowflakeGet, epSnowflakeBatch, epSegmentGet, epSegmentBatch} {
		b = sample(b, "idemq_ids_issued_total", "endpoint", endpointNames[ep], s.stats.issued[ep].Load())
	}
	b = help(b, "idemq_http_errors_total", "counter", "Errors answered, by code; a batch cut short counts too.")
	for c := range numCodes {
		b = sample(b, "idemq_http_errors_total", "code", c.String(), s.stats.errors[c].Load())
	}
	if s.tags != nil {
		b = s.tagMetrics(b)
	}
	buf.b = b
	writeBody(w, http.StatusOK, promText, buf)
}

var promText = []string{"text/plain; version=0.0.4; charset=utf-8"}

func (s *Server) tagMetrics(b []byte) []byte {
	served := s.tags.list()
	names := make([]string, 0, len(served))
	for name := range served {
		names = append(names, name)
	}
	slices.Sort(names)
	tags := make([]*tag, len(names))
	stats := make([]segment.Stats, len(names))
	for i, name := range names {
		tags[i] = served[name]
		stats[i] = tags[i].alloc.Stats()
	}
	for _, m := range [...]struct {
		name, kind, help string
		value            func(int) int64
	}{
		{"idemq_segment_ids_issued_total", "counter", "IDs of the tag issued by this server.", func(i int) int64 { return tags[i].issued.Load() }},
		{"idemq_segment_ids_left", "gauge", "IDs of the tag reserved and not yet issued, both buffers.", func(i int) int64 { return stats[i].Left }},
		{"idemq_segment_step", "gauge", "The length of the tag's next segment (Leaf's adaptive step).", func(i int) int64 { return stats[i].Step }},
		{"idemq_segment_loaded_total", "counter", "Segments of the tag loaded from the source.", func(i int) int64 { return stats[i].Segments }},
		{"idemq_segment_load_failures_total", "counter", "Loads of a segment of the tag that failed.", func(i int) int64 { return stats[i].LoadFailures }},
		{"idemq_segment_failing", "gauge", "1 while the tag's latest load failed and a retry is due.", func(i int) int64 { return b2i(stats[i].Failing) }},
	} {
		b = help(b, m.name, m.kind, m.help)
		for i, name := range names {
			b = sample(b, m.name, "tag", name, m.value(i))
		}
	}
	return b
}

func help(b []byte, name, kind, text string) []byte {
	b = append(b, "# HELP "...)
	b = append(b, name...)
	b = append(b, ' ')
	b = append(b, text...)
	b = append(b, "\n# TYPE "...)
	b = append(b, name...)
	b = append(b, ' ')
	b = append(b, kind...)
	return append(b, '\n')
}

// sample appends `name{label="value"} v`, the value escaped as the format
// requires: tags are chosen by users.
func sample(b []byte, name, label, value string, v int64) []byte {
	b = append(b, name...)
	b = append(b, '{')
	b = append(b, label...)
	b = append(b, `="`...)
	b = append(b, labelEscaper.Replace(value)...)
	b = append(b, `"} `...)
	b = strconv.AppendInt(b, v, 10)
	return append(b, '\n')
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
