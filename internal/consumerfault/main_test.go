package consumerfault

import (
	"os"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/idemq/idemq/internal/testenv"
)

func init() {
	// A child runs its role and exits before the testing package starts.
	if role := os.Getenv(childEnv); role != "" {
		rlog.SetLogLevel("error")
		os.Exit(runChild(role))
	}
}

func TestMain(m *testing.M) {
	rlog.SetLogLevel("error")
	os.Exit(testenv.Run(m))
}
