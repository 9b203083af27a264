package remoting

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/rlog"
)

func TestLogger(t *testing.T) {
	tests := []struct {
		name  string
		min   slog.Level
		level string // passed to Level first, if set
		log   func(*logger)
		want  string // in the output; "" for nothing
	}{
		{name: "InfoDroppedAtWarn", min: slog.LevelWarn,
			log: func(l *logger) { l.Info("rebalance", map[string]any{"topic": "orders"}) }},
		{name: "WarningKept", min: slog.LevelWarn,
			log:  func(l *logger) { l.Warning("pull failed", map[string]any{"broker": "b1", "topic": "orders"}) },
			want: `level=WARN msg="pull failed" source=rocketmq-client-go broker=b1 topic=orders`},
		{name: "FatalIsErrorAndReturns", min: slog.LevelWarn,
			log:  func(l *logger) { l.Fatal("cannot start", nil) },
			want: `level=ERROR msg="cannot start"`},
		{name: "LevelLowered", min: slog.LevelWarn, level: "debug",
			log:  func(l *logger) { l.Debug("heartbeat", nil) },
			want: `level=DEBUG msg=heartbeat`},
		{name: "UnknownLevelIgnored", min: slog.LevelWarn, level: "loud",
			log: func(l *logger) { l.Info("heartbeat", nil) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := newLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), tt.min)
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
// rlog.SetLogLevel lowering the level. TestMain raises the level to error
// for the package's other tests: the test puts the default, warn, back
// first, and error again when it ends.
func TestDefaultRoute(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	rlog.SetLogLevel("warn")
	t.Cleanup(func() { slog.SetDefault(old); rlog.SetLogLevel("error") })

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
