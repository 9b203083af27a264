package sqlidgen_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"

	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/idgen/sqlidgen"
)

// An operator creates a tag whose IDs start at 1000 with a maximum of 1250;
// each NextSegment reserves the next step of the counter, the last one
// short, and then none.
func ExampleSegments() {
	ctx := context.Background()
	db, remove := openExample()
	defer remove()
	src, err := sqlidgen.NewSegments(db, sqldedupe.SQLite, "")
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close()
	if err := src.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	err = src.CreateTag(ctx, segment.Tag{Tag: "orders", MaxID: 1000, Step: 100, Max: 1250, Description: "order numbers"})
	if err != nil {
		log.Fatal(err)
	}
	for {
		seg, err := src.NextSegment(ctx, "orders", 0)
		if errors.Is(err, segment.ErrMaxReached) {
			fmt.Println("orders reached its maximum")
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("[%d, %d)\n", seg.Start, seg.End)
	}
	err = src.SetMax(ctx, "orders", 1200)
	fmt.Println(errors.Is(err, idgen.ErrInvalidConfig))
	// Output:
	// [1000, 1100)
	// [1100, 1200)
	// [1200, 1250)
	// orders reached its maximum
	// true
}

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
	src, err := sqlidgen.NewSegments(db, sqldedupe.SQLite, "")
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
