package idhttp

import (
	"errors"
	"net/http"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/segment"
)

// code is an error's kind, as the "code" field of a JSON error names it.
type code int

const (
	codeBadCount code = iota
	codeBadID
	codeBadTag
	codeBadMethod
	codeUnknownTag
	codeNotServed
	codeMaxReached
	codeSourceUnavailable
	codeLeaseExpired
	codeClockBackwards
	codeUnavailable
	codeClosing
	numCodes
)

var codes = [numCodes]struct {
	name   string
	status int
}{
	codeBadCount:          {"bad_count", http.StatusBadRequest},
	codeBadID:             {"bad_id", http.StatusBadRequest},
	codeBadTag:            {"bad_tag", http.StatusBadRequest},
	codeBadMethod:         {"bad_method", http.StatusMethodNotAllowed},
	codeUnknownTag:        {"unknown_tag", http.StatusNotFound},
	codeNotServed:         {"not_served", http.StatusNotFound},
	codeMaxReached:        {"max_reached", http.StatusConflict},
	codeSourceUnavailable: {"source_unavailable", http.StatusServiceUnavailable},
	codeLeaseExpired:      {"lease_expired", http.StatusServiceUnavailable},
	codeClockBackwards:    {"clock_backwards", http.StatusServiceUnavailable},
	codeUnavailable:       {"unavailable", http.StatusServiceUnavailable},
	codeClosing:           {"closing", http.StatusServiceUnavailable},
}

func (c code) String() string { return codes[c].name }

// segmentCode sorts an error of a tag's allocator.
func segmentCode(err error) code {
	switch {
	case errors.Is(err, segment.ErrUnknownTag):
		return codeUnknownTag
	case errors.Is(err, segment.ErrMaxReached):
		return codeMaxReached
	case errors.Is(err, errClosing), errors.Is(err, idgen.ErrClosed):
		return codeClosing
	}
	return codeSourceUnavailable
}

// snowflakeCode sorts an error of the generator.
func snowflakeCode(err error) code {
	switch {
	case errors.Is(err, idgen.ErrLeaseLost):
		return codeLeaseExpired
	case errors.Is(err, idgen.ErrClockBackwards):
		return codeClockBackwards
	}
	return codeUnavailable
}

// Header values shared by the answers; net/http only reads them.
var (
	textPlain = []string{"text/plain; charset=utf-8"}
	appJSON   = []string{"application/json"}
	noStore   = []string{"no-store"}
)

func setHeaders(w http.ResponseWriter, contentType []string, n int) {
	h := w.Header()
	h["Content-Type"] = contentType
	h["Content-Length"] = []string{strconv.Itoa(n)}
}

// buffer is a pooled response body.
type buffer struct{ b []byte }

var buffers = sync.Pool{New: func() any { return &buffer{b: make([]byte, 0, 64)} }}

// writeBody sends b with status and returns the buffer to the pool.
func writeBody(w http.ResponseWriter, status int, contentType []string, buf *buffer) {
	setHeaders(w, contentType, len(buf.b))
	w.WriteHeader(status)
	w.Write(buf.b)
	buffers.Put(buf)
}

// writeID answers one ID as decimal text.
func writeID[T ~int64](w http.ResponseWriter, id T) {
	buf := buffers.Get().(*buffer)
	buf.b = strconv.AppendInt(buf.b[:0], int64(id), 10)
	writeBody(w, http.StatusOK, textPlain, buf)
}

// writeIDs answers {"ids":[…]}, with the error that cut the batch short,
// if any, beside the IDs.
func writeIDs[T ~int64](w http.ResponseWriter, ids []T, c code, err error) {
	buf := buffers.Get().(*buffer)
	b := append(buf.b[:0], `{"ids":[`...)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = strconv.AppendInt(b, int64(id), 10)
		b = append(b, '"')
	}
	b = append(b, ']')
	if err != nil {
		b = appendError(append(b, ','), c, err)
	}
	buf.b = append(b, '}')
	writeBody(w, http.StatusOK, appJSON, buf)
}

// writeError answers {"error":"…","code":"…"} with c's status.
func writeError(w http.ResponseWriter, c code, err error) {
	buf := buffers.Get().(*buffer)
	buf.b = append(appendError(append(buf.b[:0], '{'), c, err), '}')
	writeBody(w, codes[c].status, appJSON, buf)
}

// appendError appends `"error":"…","code":"…"`.
func appendError(b []byte, c code, err error) []byte {
	b = append(b, `"error":`...)
	b = appendString(b, err.Error())
	b = append(b, `,"code":"`...)
	b = append(b, codes[c].name...)
	return append(b, '"')
}

// appendString appends s as a JSON string. Errors quote tags and IDs as
// callers sent them, so control characters and invalid UTF-8 are escaped.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[r>>4], hex[r&15])
		default: // invalid UTF-8 comes as utf8.RuneError: U+FFFD
			b = utf8.AppendRune(b, r)
		}
	}
	return append(b, '"')
}

// errClosing is what a request gets once Close has begun.
var errClosing = errors.New("idhttp: server closing")
