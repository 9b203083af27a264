// Package idhttp serves IDs over HTTP in the URL shapes of Meituan's Leaf:
// snowflake IDs from one [idgen.Generator] and Leaf segment IDs from a
// [segment.Store], one [segment.Allocator] per tag. `idemq serve` runs it;
// any program can mount a [Server] on its own mux.
//
//	srv, err := idhttp.New(idhttp.Config{Snowflake: gen, Segments: src})
//	...
//	defer srv.Close()
//	http.ListenAndServe(addr, srv)
//
// [New] takes a [Config] that names at least one of Snowflake and Segments;
// every other field's zero value works and states its default.
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
// The {key} of the snowflake endpoints is the caller's business name, which
// Leaf's snowflake mode ignores too: any key is accepted, and every key
// takes IDs from the one generator. The {tag} of the segment endpoints names a counter in the
// source (Leaf's biz_tag), created beforehand with the source's CreateTag or
// `idemq segment create`.
//
// A request that fails issues no ID and answers a JSON body
// {"error":"…","code":"…"}; [Server] lists the codes.
package idhttp
