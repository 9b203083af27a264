package brokerfault

import (
	"context"
	"log/slog"
	"maps"
	"os"
	"sync"
	"testing"

	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/remoting"
)

// clientLog counts the warnings rocketmq-client-go logs, by message: the
// producer's internal retries ("start retrying to send") are visible
// nowhere else.
var clientLog = &countingHandler{counts: map[string]int{}, first: map[string]string{}}

func TestMain(m *testing.M) {
	// Before any client starts: rlog.SetLogger is not safe while they run.
	remoting.RouteLogs(slog.New(clientLog), slog.LevelWarn)
	os.Exit(testenv.Run(m))
}

// countingHandler is a slog.Handler that counts records by message and
// keeps the first of each.
type countingHandler struct {
	mu     sync.Mutex
	counts map[string]int
	first  map[string]string
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	// Keyed by message and broker: which broker failed is the point.
	key := r.Message
	var attrs []string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "broker" {
			key += " broker=" + a.Value.String()
		}
		attrs = append(attrs, a.String())
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts[key]++
	if _, ok := h.first[key]; !ok {
		h.first[key] = r.Level.String() + " " + r.Message + " " + testkit.JoinMax(attrs, 6)
	}
	return nil
}

func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

// snapshot returns the counts so far and the first record of each message.
func (h *countingHandler) snapshot() (map[string]int, map[string]string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.counts), maps.Clone(h.first)
}
