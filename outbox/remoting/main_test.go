package remoting_test

import (
	"os"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/idemq/idemq/internal/testenv"
)

func TestMain(m *testing.M) {
	rlog.SetLogLevel("error")
	os.Exit(testenv.Run(m))
}
