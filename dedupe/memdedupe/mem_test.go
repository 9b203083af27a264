package memdedupe_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/dedupetest"
	"github.com/idemq/idemq/dedupe/memdedupe"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	dedupetest.RunConformanceTests(t, func(*testing.T) dedupe.Store {
		return memdedupe.New(memdedupe.Config{})
	}, dedupetest.Features{Inspector: true, KeepsTrace: true})
}
