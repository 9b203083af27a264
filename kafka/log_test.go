package kafka_test

import (
	"log/slog"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/kafka"
)

// TestNewLogger: franz-go's warnings and errors reach the slog logger, with
// their key-value pairs as attributes; its info and debug records do not.
func TestNewLogger(t *testing.T) {
	for _, tc := range []struct {
		level kgo.LogLevel
		want  slog.Level
		kept  bool
	}{
		{kgo.LogLevelError, slog.LevelError, true},
		{kgo.LogLevelWarn, slog.LevelWarn, true},
		{kgo.LogLevelInfo, 0, false},
		{kgo.LogLevelDebug, 0, false},
	} {
		t.Run(tc.level.String(), func(t *testing.T) {
			logs := new(testkit.Logs)
			l := kafka.NewLogger(slog.New(logs))
			if l.Level() != kgo.LogLevelWarn {
				t.Errorf("Level %v, want warn: franz-go builds no record below it", l.Level())
			}
			l.Log(tc.level, "unable to open connection", "broker", "1")
			rs := logs.Records()
			if !tc.kept {
				if len(rs) != 0 {
					t.Errorf("logged %v", logs.Messages())
				}
				return
			}
			if len(rs) != 1 || rs[0].Level != tc.want || rs[0].Message != "kafka: unable to open connection" {
				t.Fatalf("logged %v", logs.Messages())
			}
			var attrs []string
			rs[0].Attrs(func(a slog.Attr) bool { attrs = append(attrs, a.String()); return true })
			if !slices.Equal(attrs, []string{"broker=1"}) {
				t.Errorf("attributes %v, want broker=1", attrs)
			}
		})
	}
}
