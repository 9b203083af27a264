package sqlidgen_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"

	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/idgen/sqlidgen"
)

// A segment.Allocator hands out a tag's IDs from segments of the table, one
// UPDATE per segment, loading the next one in the background.
func ExampleSegments_allocator() {
	ctx := context.Background()
	// A real program opens a file, with the settings the package
	// documentation gives. One connection keeps ":memory:" one database.
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		log.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	defer db.Close()
	src, err := sqlidgen.NewSegments(db, dialect.SQLite, "")
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close()
	if err := src.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if err := src.CreateTag(ctx, segment.Tag{Tag: "orders", MaxID: 1000, Step: 100}); err != nil {
		log.Fatal(err)
	}
	alloc, err := segment.New(ctx, src, "orders", segment.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer alloc.Close()
	for range 3 {
		id, err := alloc.Next(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(id)
	}
	// Output:
	// 1000
	// 1001
	// 1002
}
