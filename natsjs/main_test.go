package natsjs_test

import (
	"os"
	"testing"

	"github.com/idemq/idemq/internal/testenv"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m))
}
