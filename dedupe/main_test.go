package dedupe_test

import (
	"context"
	"errors"

	"testing"
	"time"

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

// status claims ref in s for a moment and returns the answer, releasing what
// it acquired.
func status(t *testing.T, s dedupe.Store, fp string) dedupe.Status {
	t.Helper()
	res, err := s.Claim(context.Background(), dedupe.ClaimRequest{Ref: ref, Lease: time.Hour, Fingerprint: fp})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status == dedupe.Acquired {
		if err := s.Release(context.Background(), dedupe.Ticket{Ref: ref, Token: res.Token}); err != nil {
			t.Fatal(err)
		}
	}
	return res.Status
}
