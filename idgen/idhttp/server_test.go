package idhttp_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/idhttp"
	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/internal/memidgen"
	"github.com/idemq/idemq/internal/segtag"
	"github.com/idemq/idemq/internal/testkit"
)

func TestEndpoints(t *testing.T) {
	src := create(t, segment.Tag{Tag: "orders", MaxID: 1000, Step: 100})
	gen := testkit.Generator(t, 37, idgen.Config{})
	_, c := newServer(t, idhttp.Config{Snowflake: gen, Segments: src})

	// Segment IDs follow each other across single and batch
	// requests.
	if got := c.id("/api/segment/get/orders"); got != 1000 {
		t.Errorf("first ID of orders = %d, want 1000", got)
	}
	bt := c.batch("/api/segment/batch/orders?count=250")
	if len(bt.IDs) != 250 || bt.IDs[0] != 1001 || bt.IDs[249] != 1250 || bt.Code != "" {
		t.Errorf("batch of 250 = %d IDs %v…%v code %q, want 1001…1250", len(bt.IDs), bt.IDs[0], bt.IDs[len(bt.IDs)-1], bt.Code)
	}
	if got := c.id("/api/segment/get/orders"); got != 1251 {
		t.Errorf("ID after the batch = %d, want 1251", got)
	}

	// Snowflake IDs carry the generator's node and increase.
	id := c.id("/api/snowflake/get/any-business")
	if p := gen.Config().Layout.Decode(id); p.Node != 37 {
		t.Errorf("snowflake %d decodes to node %d, want 37", id, p.Node)
	}
	sb := c.batch("/api/snowflake/batch/x?count=1000")
	if len(sb.IDs) != 1000 || !slices.IsSorted(sb.IDs) || sb.IDs[0] <= id {
		t.Errorf("snowflake batch: %d IDs, sorted %v, first %d after %d", len(sb.IDs), slices.IsSorted(sb.IDs), sb.IDs[0], id)
	}

	// Decode gives the generator's fields back.
	status, body := c.get("/api/snowflake/decode/" + id.String())
	var d struct {
		ID                                             string
		Layout                                         string
		Time                                           time.Time
		Tick                                           int64
		Node, Datacenter, Worker, Generation, Sequence int64
	}
	if err := json.Unmarshal(body, &d); status != http.StatusOK || err != nil {
		t.Fatalf("decode: %d %s (%v)", status, body, err)
	}
	p := gen.Config().Layout.Decode(id)
	want := fmt.Sprint(id, "twitter", p.Time, p.Tick, p.Node, p.Datacenter, p.Worker, p.Generation, p.Sequence)
	if got := fmt.Sprint(d.ID, d.Layout, d.Time, d.Tick, d.Node, d.Datacenter, d.Worker, d.Generation, d.Sequence); got != want {
		t.Errorf("decode = %s, want %s", got, want)
	}

	status, body = c.get("/healthz")
	if status != http.StatusOK || string(body) != `{"status":"ok"}` {
		t.Errorf("healthz = %d %s", status, body)
	}

	_, body = c.get("/metrics")
	for _, line := range []string{
		`idemq_http_requests_total{endpoint="segment_get"} 2`,
		`idemq_http_requests_total{endpoint="segment_batch"} 1`,
		`idemq_http_requests_total{endpoint="snowflake_decode"} 1`,
		`idemq_http_requests_total{endpoint="healthz"} 1`,
		`idemq_ids_issued_total{endpoint="segment_get"} 2`,
		`idemq_ids_issued_total{endpoint="segment_batch"} 250`,
		`idemq_ids_issued_total{endpoint="snowflake_get"} 1`,
		`idemq_ids_issued_total{endpoint="snowflake_batch"} 1000`,
		`idemq_http_errors_total{code="unknown_tag"} 0`,
		`idemq_segment_ids_issued_total{tag="orders"} 252`,
		`idemq_segment_step{tag="orders"} `,
		`idemq_segment_loaded_total{tag="orders"} `,
		`idemq_segment_load_failures_total{tag="orders"} 0`,
		`idemq_segment_ids_left{tag="orders"} `,
		"# TYPE idemq_segment_ids_left gauge",
	} {
		if !strings.Contains(string(body), "\n"+line) {
			t.Errorf("metrics lack %q:\n%s", line, body)
		}
	}
}

// TestBadRequests checks that every refused request answers its code and
// issues nothing: the tag's next ID follows the last one issued, and no
// snowflake ID is counted.
func TestBadRequests(t *testing.T) {
	src := create(t, segment.Tag{Tag: "t", MaxID: 1, Step: 10})
	_, c := newServer(t, idhttp.Config{Snowflake: testkit.Generator(t, 1, idgen.Config{}), Segments: src, MaxBatch: 50})
	last := c.id("/api/segment/get/t")
	for _, tc := range []struct {
		path   string
		status int
		code   string
	}{
		{"/api/segment/batch/t", 400, "bad_count"},
		{"/api/segment/batch/t?count=", 400, "bad_count"},
		{"/api/segment/batch/t?count=0", 400, "bad_count"},
		{"/api/segment/batch/t?count=-1", 400, "bad_count"},
		{"/api/segment/batch/t?count=51", 400, "bad_count"},
		{"/api/segment/batch/t?count=1e2", 400, "bad_count"},
		{"/api/segment/batch/t?count=99999999999999999999", 400, "bad_count"},
		{"/api/segment/batch/t?n=5", 400, "bad_count"},
		{"/api/snowflake/batch/k?count=0", 400, "bad_count"},
		{"/api/snowflake/batch/k?count=x", 400, "bad_count"},
		{"/api/segment/get/nope", 404, "unknown_tag"},
		{"/api/segment/batch/nope?count=5", 404, "unknown_tag"},
		{"/api/segment/get/" + strings.Repeat("x", segtag.MaxLen+1), 400, "bad_tag"},
		{"/api/segment/get/%22%5C%0A%01%FF", 404, "unknown_tag"}, // quoted in JSON as sent
		{"/api/snowflake/decode/abc", 400, "bad_id"},
		{"/api/snowflake/decode/-1", 400, "bad_id"},
		{"/api/snowflake/decode/9223372036854775808", 400, "bad_id"},
	} {
		f := c.fail(tc.path)
		if f.Status != tc.status || f.Code != tc.code {
			t.Errorf("GET %s = %d %s (%s), want %d %s", tc.path, f.Status, f.Code, f.Error, tc.status, tc.code)
		}
	}
	if status, _ := c.get("/api/segment/get"); status != http.StatusNotFound {
		t.Errorf("GET without a tag = %d, want 404", status)
	}
	for _, req := range []struct{ method, path string }{
		{http.MethodPost, "/api/segment/get/t"},
		{http.MethodHead, "/api/segment/get/t"},
		{http.MethodHead, "/api/segment/batch/t?count=5"},
		{http.MethodHead, "/api/snowflake/get/k"},
		{http.MethodHead, "/api/snowflake/batch/k?count=5"},
	} {
		r, err := http.NewRequest(req.method, c.base+req.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.c.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") == "" {
			t.Errorf("%s %s = %d, Allow %q; want 405 allowing GET", req.method, req.path, resp.StatusCode, resp.Header.Get("Allow"))
		}
	}
	if next := c.id("/api/segment/get/t"); next != last+1 {
		t.Errorf("next ID after the bad requests = %d, want %d", next, last+1)
	}
	_, body := c.get("/metrics")
	for _, line := range []string{
		`idemq_ids_issued_total{endpoint="snowflake_batch"} 0`,
		`idemq_ids_issued_total{endpoint="segment_batch"} 0`,
		`idemq_http_errors_total{code="bad_count"} 10`,
		`idemq_http_errors_total{code="unknown_tag"} 3`,
		`idemq_http_errors_total{code="bad_tag"} 1`,
		`idemq_http_errors_total{code="bad_id"} 3`,
		`idemq_http_errors_total{code="bad_method"} 4`,
		`idemq_ids_issued_total{endpoint="snowflake_get"} 0`,
		`idemq_ids_issued_total{endpoint="segment_get"} 2`,
	} {
		if !strings.Contains(string(body), "\n"+line+"\n") {
			t.Errorf("metrics lack %q:\n%s", line, body)
		}
	}
}

func TestNotServed(t *testing.T) {
	src := create(t, segment.Tag{Tag: "t", Step: 10})
	_, segOnly := newServer(t, idhttp.Config{Segments: src})
	_, snowOnly := newServer(t, idhttp.Config{Snowflake: testkit.Generator(t, 2, idgen.Config{})})
	for _, tc := range []struct {
		c    client
		path string
	}{
		{segOnly, "/api/snowflake/get/k"},
		{segOnly, "/api/snowflake/batch/k?count=2"},
		{segOnly, "/api/snowflake/decode/1"},
		{snowOnly, "/api/segment/get/t"},
		{snowOnly, "/api/segment/batch/t?count=2"},
	} {
		if f := tc.c.fail(tc.path); f.Status != 404 || f.Code != "not_served" {
			t.Errorf("GET %s = %d %s, want 404 not_served", tc.path, f.Status, f.Code)
		}
	}
	if got := segOnly.id("/api/segment/get/t"); got != 0 {
		t.Errorf("segments-only server's ID = %d, want 0", got)
	}
	snowOnly.id("/api/snowflake/get/k")
	for _, c := range []client{segOnly, snowOnly} {
		if status, body := c.get("/healthz"); status != 200 {
			t.Errorf("healthz = %d %s", status, body)
		}
	}
}

func TestMaxReached(t *testing.T) {
	src := create(t, segment.Tag{Tag: "small", MaxID: 10, Step: 4, Max: 25})
	_, c := newServer(t, idhttp.Config{Segments: src})

	var got []idgen.ID
	got = append(got, c.id("/api/segment/get/small"))
	bt := c.batch("/api/segment/batch/small?count=1000")
	got = append(got, bt.IDs...)
	if want := idRange(10, 25); !slices.Equal(got, want) || bt.Code != "max_reached" || bt.Error == "" {
		t.Errorf("IDs up to the maximum = %v, code %q %q; want %v and max_reached", got, bt.Code, bt.Error, want)
	}
	for _, path := range []string{"/api/segment/get/small", "/api/segment/batch/small?count=2"} {
		if f := c.fail(path); f.Status != http.StatusConflict || f.Code != "max_reached" {
			t.Errorf("GET %s at the maximum = %d %s, want 409 max_reached", path, f.Status, f.Code)
		}
	}
	// The tag's maximum is every replica's: reported, still healthy.
	status, body := c.get("/healthz")
	if status != http.StatusOK || !strings.Contains(string(body), `"code":"max_reached"`) {
		t.Errorf("healthz at the maximum = %d %s, want 200 reporting max_reached", status, body)
	}
}

func idRange(from, to int64) []idgen.ID {
	var ids []idgen.ID
	for i := from; i < to; i++ {
		ids = append(ids, idgen.ID(i))
	}
	return ids
}

// TestSourceDown: with the source unreachable, the IDs already reserved
// keep flowing while /healthz and /metrics report the failing loads; once
// none is left requests fail with 503, and they succeed again once the
// source is back.
func TestSourceDown(t *testing.T) {
	real := create(t, segment.Tag{Tag: "t", Step: 100})
	src := &faulty{Store: real}
	_, c := newServer(t, idhttp.Config{Segments: src})

	seen := map[idgen.ID]bool{}
	take := func() (failure, bool) {
		status, body := c.get("/api/segment/get/t")
		if status != http.StatusOK {
			f := failure{Status: status}
			if err := json.Unmarshal(body, &f); err != nil {
				t.Fatal(err)
			}
			return f, false
		}
		id, err := idgen.Parse(string(body))
		if err != nil || seen[id] {
			t.Fatalf("ID %s: %v, seen before: %v", body, err, seen[id])
		}
		seen[id] = true
		return failure{}, true
	}
	take()
	src.down.Store(true)

	// The background load fails once a tenth is used; IDs flow on.
	reported := false
	for !reported {
		if f, ok := take(); !ok {
			t.Fatalf("no failing load reported before the IDs ran out at %d: %+v", len(seen), f)
		}
		status, body := c.get("/healthz")
		reported = strings.Contains(string(body), errDown.Error())
		if reported && (status != http.StatusOK || !strings.Contains(string(body), "IDs left")) {
			t.Errorf("healthz with IDs left = %d %s, want 200 reporting the failure", status, body)
		}
	}
	_, body := c.get("/metrics")
	if !strings.Contains(string(body), "\nidemq_segment_failing{tag=\"t\"} 1\n") ||
		strings.Contains(string(body), "\nidemq_segment_load_failures_total{tag=\"t\"} 0\n") {
		t.Errorf("metrics do not report the failing loads:\n%s", body)
	}

	var failed failure
	for ok := true; ok; {
		failed, ok = take()
	}
	if len(seen) < 100 || failed.Status != http.StatusServiceUnavailable || failed.Code != "source_unavailable" || !strings.Contains(failed.Error, errDown.Error()) {
		t.Errorf("with the source down: %d IDs, then %+v; want the first segment's 100, then 503 source_unavailable naming the cause", len(seen), failed)
	}
	status, body := c.get("/healthz")
	if status != http.StatusServiceUnavailable || !strings.Contains(string(body), errDown.Error()) {
		t.Errorf("healthz with nothing left = %d %s, want 503 naming the cause", status, body)
	}

	// The allocator retries with backoff: IDs resume at its next try.
	src.down.Store(false)
	testkit.WaitFor(t, "an ID after the source came back", func() bool {
		_, ok := take()
		return ok
	})
	if status, body := c.get("/healthz"); status != http.StatusOK {
		t.Errorf("healthz once the source is back = %d %s", status, body)
	}
}

// TestUnknownTag: a missing tag is remembered for NegativeTTL, not longer.
func TestUnknownTag(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ttl       time.Duration
		wantCalls int64 // for ten requests
		served    bool  // once created
	}{
		{"remembered", time.Hour, 1, false},
		{"forgotten", time.Nanosecond, 10, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			real := memidgen.NewSegments()
			src := &faulty{Store: real}
			_, c := newServer(t, idhttp.Config{Segments: src, NegativeTTL: tc.ttl})
			for range 10 {
				if f := c.fail("/api/segment/get/later"); f.Code != "unknown_tag" {
					t.Fatalf("missing tag: %+v", f)
				}
			}
			if got := src.calls.Load(); got != tc.wantCalls {
				t.Errorf("source calls for 10 requests = %d, want %d", got, tc.wantCalls)
			}
			if err := real.CreateTag(t.Context(), segment.Tag{Tag: "later", MaxID: 7, Step: 10}); err != nil {
				t.Fatal(err)
			}
			if status, body := c.get("/api/segment/get/later"); (status == http.StatusOK) != tc.served {
				t.Errorf("after CreateTag: %d %s, served %v", status, body, tc.served)
			}
		})
	}
}

// TestConcurrentClients: many clients on single and batch endpoints of
// both kinds, first requests for a tag included, never get an ID twice.
func TestConcurrentClients(t *testing.T) {
	tags := []string{"a", "b", "c"}
	src := &faulty{Store: create(t, segment.Tag{Tag: "a", Step: 50}, segment.Tag{Tag: "b", Step: 50}, segment.Tag{Tag: "c", Step: 50})}
	_, c := newServer(t, idhttp.Config{Snowflake: testkit.Generator(t, 3, idgen.Config{}), Segments: src})

	const clients, rounds = 16, 40
	var (
		mu   sync.Mutex
		seen = map[string]map[idgen.ID]bool{}
		wg   sync.WaitGroup
	)
	record := func(space string, ids ...idgen.ID) {
		mu.Lock()
		defer mu.Unlock()
		if seen[space] == nil {
			seen[space] = map[idgen.ID]bool{}
		}
		for _, id := range ids {
			if seen[space][id] {
				t.Errorf("%s: ID %d issued twice", space, id)
			}
			seen[space][id] = true
		}
	}
	for i := range clients {
		wg.Go(func() {
			for r := range rounds {
				tg := tags[(i+r)%len(tags)]
				if r%2 == 0 {
					record(tg, c.id("/api/segment/get/"+tg))
					record("snowflake", c.id("/api/snowflake/get/k"))
				} else {
					record(tg, c.batch(fmt.Sprintf("/api/segment/batch/%s?count=%d", tg, 1+r)).IDs...)
					record("snowflake", c.batch("/api/snowflake/batch/k?count=37").IDs...)
				}
			}
		})
	}
	wg.Wait()
	total := 0
	for _, ids := range seen {
		total += len(ids)
	}
	t.Logf("%d IDs to %d clients, 0 duplicates, %d source calls", total, clients, src.calls.Load())
}

func TestClose(t *testing.T) {
	src := create(t, segment.Tag{Tag: "t", Step: 10})
	srv, c := newServer(t, idhttp.Config{Snowflake: testkit.Generator(t, 4, idgen.Config{}), Segments: src})
	c.id("/api/segment/get/t")
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/api/segment/get/t", "/api/segment/get/other", "/api/snowflake/get/k", "/api/segment/batch/t?count=3"} {
		if f := c.fail(path); f.Status != http.StatusServiceUnavailable || f.Code != "closing" {
			t.Errorf("GET %s after Close = %d %s, want 503 closing", path, f.Status, f.Code)
		}
	}
	if status, _ := c.get("/healthz"); status != http.StatusServiceUnavailable {
		t.Errorf("healthz after Close = %d, want 503", status)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	gen := testkit.Generator(t, 5, idgen.Config{})
	for _, cfg := range []idhttp.Config{
		{},
		{Snowflake: gen, MaxBatch: -1},
		{Snowflake: gen, MaxBatch: 1<<20 + 1},
		{Snowflake: gen, Segment: segment.Config{LoadTimeout: -time.Second}},
		{Snowflake: gen, NegativeTTL: -time.Second},
	} {
		if _, err := idhttp.New(cfg); !errors.Is(err, idgen.ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

// TestFirstRequests: concurrent first requests for a tag share one load.
func TestFirstRequests(t *testing.T) {
	real := create(t, segment.Tag{Tag: "t", Step: 100_000})
	src := &faulty{Store: real}
	_, c := newServer(t, idhttp.Config{Segments: src})
	const clients = 32
	ids := make([]idgen.ID, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() { ids[i] = c.id("/api/segment/get/t") })
	}
	wg.Wait()
	slices.Sort(ids)
	if !slices.Equal(ids, idRange(0, clients)) {
		t.Errorf("first IDs = %v, want 0 to %d", ids, clients-1)
	}
	if n := src.calls.Load(); n != 1 {
		t.Errorf("%d first requests made %d source calls, want 1", clients, n)
	}
}

// TestSnowflakeUnavailable: a generator that refuses to issue (here, its
// clock stepped back) answers 503 with the reason, and so does /healthz.
func TestSnowflakeUnavailable(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC), 0)
	gen := testkit.Generator(t, 9, idgen.Config{Clock: clock})
	_, c := newServer(t, idhttp.Config{Snowflake: gen})
	c.id("/api/snowflake/get/k")
	clock.Add(-time.Second)
	for _, path := range []string{"/api/snowflake/get/k", "/api/snowflake/batch/k?count=10"} {
		if f := c.fail(path); f.Status != http.StatusServiceUnavailable || f.Code != "clock_backwards" {
			t.Errorf("GET %s with the clock behind = %d %s, want 503 clock_backwards", path, f.Status, f.Code)
		}
	}
	if status, body := c.get("/healthz"); status != http.StatusServiceUnavailable || !strings.Contains(string(body), `"code":"clock_backwards"`) {
		t.Errorf("healthz with the clock behind = %d %s", status, body)
	}
	clock.Add(2 * time.Second)
	c.id("/api/snowflake/get/k")
}

// TestMetricsQuoteTags: tags are chosen by users; the label values of
// /metrics escape what Prometheus' text format requires.
func TestMetricsQuoteTags(t *testing.T) {
	tag := "a\"b\\c\nd"
	src := create(t, segment.Tag{Tag: tag, Step: 10})
	_, c := newServer(t, idhttp.Config{Segments: src})
	c.id("/api/segment/get/" + url.PathEscape(tag))
	_, body := c.get("/metrics")
	if want := `idemq_segment_ids_issued_total{tag="a\"b\\c\nd"} 1`; !strings.Contains(string(body), "\n"+want+"\n") {
		t.Errorf("metrics lack %s:\n%s", want, body)
	}
}
