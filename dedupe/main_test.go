package dedupe_test

import (
	"errors"
	"testing"

	"go.uber.org/goleak"

	"github.com/idemq/idemq/dedupe"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	ref        = dedupe.Ref{Namespace: "test", Group: "g", Key: "k"}
	errHandler = errors.New("handler failed")
)

func newGuard(t *testing.T, s dedupe.Store, cfg dedupe.GuardConfig) *dedupe.Guard {
	t.Helper()
	g, err := dedupe.NewGuard(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
