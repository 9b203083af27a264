package rmqlog_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/idemq/idemq/rmqlog"
)

func TestLogger(t *testing.T) {
	tests := []struct {
		name  string
		min   slog.Level
		level string // passed to Level first, if set
		log   func(*rmqlog.Logger)
		want  string // in the output; "" for nothing
	}{
		{name: "InfoDroppedAtWarn", min: slog.LevelWarn,
			log: func(l *rmqlog.Logger) { l.Info("rebalance", map[string]any{"topic": "orders"}) }},
		{name: "WarningKept", min: slog.LevelWarn,
			log:  func(l *rmqlog.Logger) { l.Warning("pull failed", map[string]any{"broker": "b1", "topic": "orders"}) },
			want: `level=WARN msg="pull failed" source=rocketmq-client-go broker=b1 topic=orders`},
		{name: "FatalIsErrorAndReturns", min: slog.LevelWarn,
			log:  func(l *rmqlog.Logger) { l.Fatal("cannot start", nil) },
			want: `level=ERROR msg="cannot start"`},
		{name: "LevelLowered", min: slog.LevelWarn, level: "debug",
			log:  func(l *rmqlog.Logger) { l.Debug("heartbeat", nil) },
			want: `level=DEBUG msg=heartbeat`},
		{name: "UnknownLevelIgnored", min: slog.LevelWarn, level: "loud",
			log: func(l *rmqlog.Logger) { l.Info("heartbeat", nil) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := rmqlog.New(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), tt.min)
			if tt.level != "" {
				l.Level(tt.level)
			}
			tt.log(l)
			out := buf.String()
			if tt.want == "" && out != "" {
				t.Fatalf("logged %q, want nothing", out)
			}
			if !strings.Contains(out, tt.want) {
				t.Fatalf("logged %q, want %q in it", out, tt.want)
			}
		})
	}
}

// TestDefaultRoute checks what a program gets by linking the package: the
// client's warnings in slog.Default, its info records dropped, and
// rlog.SetLogLevel lowering the level.
func TestDefaultRoute(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(old); rlog.SetLogLevel("warn") })

	rlog.Info("rebalance", map[string]any{"topic": "orders"})
	rlog.Warning("pull failed", map[string]any{"broker": "b1"})
	if got := buf.String(); strings.Contains(got, "rebalance") || !strings.Contains(got, `level=WARN msg="pull failed" source=rocketmq-client-go broker=b1`) {
		t.Fatalf("default route logged %q, want the warning only", got)
	}
	buf.Reset()
	rlog.SetLogLevel("info")
	rlog.Info("rebalance", nil)
	if got := buf.String(); !strings.Contains(got, "msg=rebalance") {
		t.Fatalf("after SetLogLevel(info) logged %q, want the info record", got)
	}
}
