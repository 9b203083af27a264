package cached_test

import (
	"context"
	"fmt"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/cached"
)

func Example() {
	// The generator borrows future time, so that padding a buffer of
	// eight milliseconds' worth of IDs (the default size) does not wait
	// for eight ticks.
	gen, err := idgen.New(7, idgen.Config{Rollback: idgen.Borrow{MaxAhead: 10 * time.Millisecond}})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	ids, err := cached.New(ctx, gen, cached.Config{}) // owns gen from here
	if err != nil {
		gen.Close()
		panic(err)
	}
	defer ids.Close() // closes gen; the IDs still buffered are lost

	id, err := ids.Next(ctx)
	if err != nil {
		panic(err)
	}
	s := ids.Stats()
	fmt.Println("node", idgen.Twitter.Decode(id).Node, "buffered", s.Buffered, "of", s.Size)
	// Output: node 7 buffered 32767 of 32768
}
