package scramble_test

import (
	"fmt"
	"log"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/scramble"
)

// An order number shown to customers reveals neither when the order was
// placed nor how many came before it; the key turns it back into the ID.
func Example() {
	// 16, 24 or 32 secret bytes; a real program reads them from its
	// secret store, and never changes them.
	s, err := scramble.New([]byte("0123456789abcdef"), 63)
	if err != nil {
		log.Fatal(err)
	}
	for _, id := range []idgen.ID{1855236318275813376, 1855236318275813377} {
		public, err := s.Scramble(int64(id))
		if err != nil {
			log.Fatal(err)
		}
		back, err := s.Unscramble(public)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(public, idgen.ID(back) == id)
	}
	// Output:
	// 4635746293066167406 true
	// 312776317699648878 true
}
