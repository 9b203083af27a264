package idgen_test

import (
	"context"
	"fmt"
	"time"

	"github.com/idemq/idemq/idgen"
)

func ExampleCached() {
	// The generator borrows future time, so that padding a buffer of
	// eight milliseconds' worth of IDs (the default size) does not wait
	// for eight ticks.
	gen, err := idgen.New(7, idgen.Config{Rollback: idgen.Borrow{MaxAhead: 10 * time.Millisecond}})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	cached, err := idgen.NewCached(ctx, gen, idgen.CachedConfig{}) // owns gen from here
	if err != nil {
		gen.Close()
		panic(err)
	}
	defer cached.Close() // closes gen; the IDs still buffered are lost

	id, err := cached.Next(ctx)
	if err != nil {
		panic(err)
	}
	s := cached.Stats()
	fmt.Println("node", cached.Decode(id).Node, "buffered", s.Buffered, "of", s.Size)
	// Output: node 7 buffered 32767 of 32768
}
