package grpcv5_test

import (
	"os"
	"testing"

	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testenv"
)

// A child runs its role and exits. The log tests' roles start a client:
// "start" as it is, "reset" after the client's ResetLogger.
func TestMain(m *testing.M) {
	racechild.Main(map[string]func() error{
		"start": func() error { return startClient(false) },
		"reset": func() error { return startClient(true) },
	})
	os.Exit(testenv.Run(m))
}
