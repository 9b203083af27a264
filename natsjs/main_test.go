package natsjs_test

import (
	"os"
	"testing"

	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testenv"
)

// A child runs its role and exits: the fault tests' consumers (see
// worker).
func TestMain(m *testing.M) {
	racechild.Main(map[string]func() error{roleWorker: worker})
	os.Exit(testenv.Run(m))
}
