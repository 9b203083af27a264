package testkit

import (
	"testing"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/msgkey"
)

// Keys returns a key source of snowflake IDs from a generator on node, as
// producers and outboxes under test stamp their messages.
func Keys(tb testing.TB, node int64) msgkey.Source {
	tb.Helper()
	gen, err := idgen.New(node, idgen.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	return msgkey.FromIDs(gen)
}
