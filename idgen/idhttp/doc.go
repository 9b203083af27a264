// Package idhttp serves IDs over HTTP in the URL shapes of Meituan's Leaf:
// snowflake IDs from one [idgen.Generator] and Leaf segment IDs from a
// [segment.Source], one [segment.Allocator] per tag. `idemq serve` runs it;
// any program can mount a [Server] on its own mux.
//
//	srv, err := idhttp.New(idhttp.Config{Snowflake: gen, Segments: src})
//	...
//	defer srv.Close()
//	http.ListenAndServe(addr, srv)
//
// # Endpoints
//
// Every endpoint answers GET only; /healthz, /metrics and decode answer HEAD
// too, while the others refuse it (bad_method): its answer has no body, so
// the IDs would be lost.
//
//	GET /api/snowflake/get/{key}             one snowflake ID, decimal text
//	GET /api/snowflake/batch/{key}?count=N   {"ids":["…",…]}
//	GET /api/snowflake/decode/{id}           the ID's fields by the served layout, JSON
//	GET /api/segment/get/{tag}               the next ID of tag, decimal text
//	GET /api/segment/batch/{tag}?count=N     {"ids":["…",…]}
//	GET /healthz                             {"status":"ok",…} or 503 with the problems
//	GET /metrics                             Prometheus text format
//
// A single ID is plain decimal text without a newline, as Leaf answers, so a
// Leaf client keeps working. A batch holds N IDs, 1 to [Config.MaxBatch], in
// increasing order, as decimal strings: JavaScript loses integers past 2^53.
//
// The {key} of the snowflake endpoints is the caller's business name, as in
// Leaf, whose snowflake mode ignores it too: every key takes IDs from the one
// generator, so IDs are unique across keys. Any key is accepted; it is not
// counted per key, so callers cannot grow the metrics. The {tag} of the
// segment endpoints names a counter in the source (Leaf's biz_tag), created
// beforehand with the source's CreateTag or `idemq segment create`.
//
// # Errors
//
// A request that fails issues no ID and answers a JSON body
// {"error":"…","code":"…"} with one of these codes:
//
//	400 bad_count           count missing, not a number, or outside 1..MaxBatch
//	400 bad_id              the ID to decode is not a decimal ID
//	400 bad_tag             a tag longer than segment.MaxTagLen bytes
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
// the maximum, and a 410 is cacheable by default. Every answer carries
// Cache-Control: no-store.
//
// A batch cut short by the tag's maximum or by the source — some IDs taken,
// then the error — answers 200 with the IDs it holds and the error's code
// beside them, {"ids":[…],"error":"…","code":"max_reached"}, rather than
// throwing reserved IDs away: check len(ids).
//
// # Segment tags
//
// A tag's allocator is made on the first request for it, loading the tag's
// first segment; concurrent first requests wait for the same load. Later
// requests take IDs from memory while the allocator loads the next segment in
// the background (Leaf's double buffer). A tag the source does not hold, or
// one at its maximum, is remembered for [Config.NegativeTTL] so that a client
// asking again and again costs the source one call per TTL, and a tag created
// meanwhile is served after at most that long. A source that cannot be reached
// is not remembered: the next request tries again.
//
// # Health and metrics
//
// /healthz answers 503 when the generator cannot issue an ID (it takes one to
// find out; IDs are not scarce) or when a tag's allocator has no ID left and
// its last load failed. It answers 200 but lists the problem for a tag whose
// loads fail while IDs are left, and for a tag at its maximum: every replica
// shares that, and taking them all out of a load balancer would not help.
//
// /metrics counts requests and IDs issued per endpoint and errors per code,
// and shows every served tag's allocator statistics: step, segments loaded,
// load failures, IDs left, IDs issued.
package idhttp
