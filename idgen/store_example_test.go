package idgen_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/idemq/idemq/idgen"
)

func ExampleOpenFileStore() {
	dir, _ := os.MkdirTemp("", "idgen")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "node-7.hwm")

	store, err := idgen.OpenFileStore(path)
	if err != nil {
		fmt.Println(err) // another generator has the file: do not start
		return
	}
	gen, _ := idgen.New(7, idgen.Config{Store: store})

	// A second generator given the same file, in this process or another,
	// fails at start instead of issuing the same IDs.
	_, err = idgen.OpenFileStore(path)
	fmt.Println(errors.Is(err, idgen.ErrInvalidConfig))

	gen.Close()   // saves the exact mark
	store.Close() // lets the next run take the file
	again, err := idgen.OpenFileStore(path)
	fmt.Println(err)
	again.Close()
	// Output:
	// true
	// <nil>
}
