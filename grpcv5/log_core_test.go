package grpcv5

import (
	"log/slog"
	"maps"
	"testing"

	"github.com/idemq/idemq/internal/testkit"
)

// attrsOf returns r's attributes as strings.
func attrsOf(r slog.Record) map[string]string {
	m := map[string]string{}
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	return m
}

// TestCore logs through the client's package-level logger, as the client
// does, and checks what reaches slog at each level.
func TestCore(t *testing.T) {
	t.Cleanup(func() { RouteLogs(nil, slog.LevelWarn) })
	c := new(testkit.Logs)
	lv := RouteLogs(slog.New(c), slog.LevelWarn)
	log := base.With("client_id", "c1")

	log.Infof("connected to %s", "proxy")
	log.Debug("heartbeat")
	log.Warnf("failed to send message, attempt=%d", 1)
	log.Errorw("end transaction", "messageId", "m1")
	log.Fatalf("failed to register views: %v", "boom") // must return
	tests := []struct {
		level slog.Level
		msg   string
		attrs map[string]string
	}{
		{slog.LevelWarn, "failed to send message, attempt=1", map[string]string{"source": "rocketmq-clients/golang/v5", "client_id": "c1"}},
		{slog.LevelError, "end transaction", map[string]string{"source": "rocketmq-clients/golang/v5", "client_id": "c1", "messageId": "m1"}},
		{slog.LevelError, "failed to register views: boom", map[string]string{"source": "rocketmq-clients/golang/v5", "client_id": "c1"}},
	}
	got := c.Take()
	if len(got) != len(tests) {
		t.Fatalf("got %d records, want %d (info and debug dropped): %v", len(got), len(tests), got)
	}
	for i, tt := range tests {
		if got[i].Level != tt.level || got[i].Message != tt.msg {
			t.Errorf("record %d: %v %q, want %v %q", i, got[i].Level, got[i].Message, tt.level, tt.msg)
		}
		if a := attrsOf(got[i]); !maps.Equal(a, tt.attrs) {
			t.Errorf("record %d: attributes %v, want %v", i, a, tt.attrs)
		}
	}

	lv.Set(slog.LevelDebug)
	log.Debug("heartbeat")
	if got := c.Take(); len(got) != 1 || got[0].Level != slog.LevelDebug {
		t.Fatalf("after lowering the level: %v, want the debug record", got)
	}
}

// TestRouteToDefault checks that a nil logger means slog.Default as it is
// when the record is logged, not when RouteLogs was called.
func TestRouteToDefault(t *testing.T) {
	prev := slog.Default()
	t.Cleanup(func() { slog.SetDefault(prev); RouteLogs(nil, slog.LevelWarn) })
	RouteLogs(nil, slog.LevelInfo)
	c := new(testkit.Logs)
	slog.SetDefault(slog.New(c))
	base.Info("begin to start the client manager")
	got := c.Take()
	if len(got) != 1 || got[0].Message != "begin to start the client manager" {
		t.Fatalf("slog.Default got %v", got)
	}
}
