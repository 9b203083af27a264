package consumer_test

import (
	"os"
	"testing"

	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testenv"
)

func TestMain(m *testing.M) {
	// A child runs its role and exits.
	racechild.Main(map[string]func() error{roleTxHolder: txHolder})
	os.Exit(testenv.Run(m))
}
