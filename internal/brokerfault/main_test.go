package brokerfault

import (
	"log/slog"
	"os"
	"testing"

	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/remoting"
)

// clientLog keeps the warnings rocketmq-client-go logs: the producer's
// internal retries ("start retrying to send") are visible nowhere else.
var clientLog = &testkit.Logs{}

func TestMain(m *testing.M) {
	// A child runs its role and exits; its client logs go to its standard
	// error (remoting routes them to slog.Default).
	racechild.Main(roles)
	// Before any client starts: rlog.SetLogger is not safe while they run.
	remoting.RouteLogs(slog.New(clientLog), slog.LevelWarn)
	os.Exit(testenv.Run(m))
}

// clientWarnings counts the records clientLog kept so far by message and
// broker (which broker failed is the point), and returns the first of each.
func clientWarnings() (map[string]int, map[string]string) {
	counts, first := map[string]int{}, map[string]string{}
	for _, r := range clientLog.Records() {
		key := r.Message
		var attrs []string
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "broker" {
				key += " broker=" + a.Value.String()
			}
			attrs = append(attrs, a.String())
			return true
		})
		if counts[key]++; counts[key] == 1 {
			first[key] = r.Level.String() + " " + r.Message + " " + testkit.JoinMax(attrs, 6)
		}
	}
	return counts, first
}
