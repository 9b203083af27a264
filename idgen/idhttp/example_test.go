package idhttp_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	_ "modernc.org/sqlite"

	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/idhttp"
	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/idgen/sqlidgen"
)

func Example() {
	// Segment tags live in a store that every replica shares (here an
	// SQLite file's worth in memory; one connection keeps ":memory:" one
	// database); snowflake IDs need a node nobody else uses (see
	// idgen.NewLeased).
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		panic(err)
	}
	db.SetMaxOpenConns(1)
	defer db.Close()
	src, err := sqlidgen.NewSegments(db, dialect.SQLite, "")
	if err != nil {
		panic(err)
	}
	defer src.Close()
	if err := src.Migrate(context.Background()); err != nil {
		panic(err)
	}
	if err := src.CreateTag(context.Background(), segment.Tag{Tag: "orders", MaxID: 1000, Step: 100}); err != nil {
		panic(err)
	}
	gen, err := idgen.New(7, idgen.Config{})
	if err != nil {
		panic(err)
	}
	defer gen.Close()
	srv, err := idhttp.New(idhttp.Config{Snowflake: gen, Segments: src, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv)
	defer hs.Close()

	get := func(path string) {
		resp, err := http.Get(hs.URL + path)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		fmt.Println(resp.StatusCode, string(body))
	}
	get("/api/segment/get/orders")
	get("/api/segment/batch/orders?count=3")
	get("/api/segment/batch/orders?count=0")
	id, _ := idgen.Twitter.Compose(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC), 7, 0, 5)
	get("/api/snowflake/decode/" + id.String())
	// Output:
	// 200 1000
	// 200 {"ids":["1001","1002","1003"]}
	// 400 {"error":"idhttp: count \"0\" is not a number from 1 to 1000","code":"bad_count"}
	// 200 {"id":"2124835351557074949","layout":"twitter","time":"2026-11-23T12:00:00.000Z","tick":506600225343,"node":7,"datacenter":0,"worker":7,"generation":0,"sequence":5}
}
