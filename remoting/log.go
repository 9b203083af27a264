package remoting

import (
	"context"
	"log/slog"
	"slices"

	"github.com/apache/rocketmq-client-go/v2/rlog"
)

// logger is an rlog.Logger that writes to an slog.Logger the records at
// or above its level.
type logger struct {
	l     *slog.Logger // nil: slog.Default() when the record is logged
	level *slog.LevelVar
}

var _ rlog.Logger = (*logger)(nil)

// The client's default logger prints everything at info to standard output.
func init() {
	lv := new(slog.LevelVar)
	lv.Set(slog.LevelWarn)
	rlog.SetLogger(&logger{level: lv})
}

// newLogger returns a logger writing to l the records at or above min.
func newLogger(l *slog.Logger, min slog.Level) *logger {
	lv := new(slog.LevelVar)
	lv.Set(min)
	return &logger{l: l, level: lv}
}

// RouteLogs makes the client log to l (nil: [slog.Default] as it is when
// each record is logged), records below min dropped, and returns the level
// to change it later, also while clients run. Without it, linking the
// package routes the client's records at warn and above to slog.Default.
// rlog.SetLogger, which it calls, is not safe to call while clients run:
// call RouteLogs before starting any.
func RouteLogs(l *slog.Logger, min slog.Level) *slog.LevelVar {
	lg := newLogger(l, min)
	rlog.SetLogger(lg)
	return lg.level
}

func (g *logger) Debug(msg string, fields map[string]any) { g.log(slog.LevelDebug, msg, fields) }
func (g *logger) Info(msg string, fields map[string]any)  { g.log(slog.LevelInfo, msg, fields) }
func (g *logger) Warning(msg string, fields map[string]any) {
	g.log(slog.LevelWarn, msg, fields)
}
func (g *logger) Error(msg string, fields map[string]any) { g.log(slog.LevelError, msg, fields) }

// Fatal logs at error: the client's own logger exits the process there,
// which a library must not do to its host.
func (g *logger) Fatal(msg string, fields map[string]any) { g.log(slog.LevelError, msg, fields) }

// Level sets the level from the client's names for it, as
// rlog.SetLogLevel passes them; an unknown name changes nothing.
func (g *logger) Level(level string) {
	if lv, ok := levels[level]; ok {
		g.level.Set(lv)
	}
}

var levels = map[string]slog.Level{
	"debug": slog.LevelDebug, "info": slog.LevelInfo,
	"warn": slog.LevelWarn, "warning": slog.LevelWarn,
	"error": slog.LevelError, "fatal": slog.LevelError,
}

// OutputPath does nothing: where records go is the slog handler's choice.
func (g *logger) OutputPath(string) error { return nil }

func (g *logger) log(level slog.Level, msg string, fields map[string]any) {
	ctx := context.Background()
	l := g.l
	if l == nil {
		l = slog.Default()
	}
	if level < g.level.Level() || !l.Enabled(ctx, level) {
		return
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys) // one order for one record, run after run
	attrs := make([]slog.Attr, 0, len(keys)+1)
	attrs = append(attrs, slog.String("source", "rocketmq-client-go"))
	for _, k := range keys {
		attrs = append(attrs, slog.Any(k, fields[k]))
	}
	l.LogAttrs(ctx, level, msg, attrs...)
}
