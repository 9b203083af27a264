package remoting_test

import (
	"os"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/relaychild"
	"github.com/idemq/idemq/internal/testenv"
)

func TestMain(m *testing.M) {
	rlog.SetLogLevel("error")
	// A child runs its role and exits.
	racechild.Main(map[string]func() error{
		roleOrderly:     orderlyMember,
		relaychild.Role: relaychild.Run,
	})
	os.Exit(testenv.Run(m))
}
