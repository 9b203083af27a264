package idhttp

import (
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/idemq/idemq/idgen/segment"
)

// health answers {"status":"ok"} or, with 503, {"status":"unavailable"}, with
// the problems found either way:
//
//	{"status":"unavailable","problems":[{"what":"snowflake","code":"lease_expired","error":"…"}]}
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	type problem struct {
		what string
		c    code
		err  error
	}
	var problems []problem
	down := false
	if s.closing.Load() {
		problems, down = append(problems, problem{"server", codeClosing, errClosing}), true
	}
	if s.gen != nil && !down {
		// Taking an ID is the one way to learn whether the generator
		// can: its lease, its clock. IDs are not scarce.
		if _, err := s.gen.Next(r.Context()); err != nil {
			problems, down = append(problems, problem{"snowflake", snowflakeCode(err), err}), true
		}
	}
	if s.tags != nil && !down {
		served := s.tags.list()
		names := make([]string, 0, len(served))
		for name := range served {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			st := served[name].alloc.Stats()
			switch {
			case !st.Failing:
			case errors.Is(st.LastError, segment.ErrMaxReached):
				// Every replica shares a tag's maximum: report it,
				// stay in the load balancer.
				problems = append(problems, problem{"tag " + name, codeMaxReached, st.LastError})
			case st.Left == 0:
				problems = append(problems, problem{"tag " + name, codeSourceUnavailable,
					fmt.Errorf("no ID left and the last load failed: %w", st.LastError)})
				down = true
			default:
				problems = append(problems, problem{"tag " + name, codeSourceUnavailable,
					fmt.Errorf("the last load failed; %d IDs left: %w", st.Left, st.LastError)})
			}
		}
	}
	buf := buffers.Get().(*buffer)
	b := append(buf.b[:0], `{"status":"ok"`...)
	status := http.StatusOK
	if down {
		b = append(buf.b[:0], `{"status":"unavailable"`...)
		status = http.StatusServiceUnavailable
	}
	if len(problems) > 0 {
		b = append(b, `,"problems":[`...)
		for i, p := range problems {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"what":`...)
			b = appendString(b, p.what)
			b = appendError(append(b, ','), p.c, p.err)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	buf.b = append(b, '}')
	writeBody(w, status, appJSON, buf)
}
