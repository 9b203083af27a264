// Package rmqlog routes the logs of rocketmq-client-go (its package rlog)
// to log/slog, at warn and above by default.
//
// The client logs to standard output through logrus at info by default:
// dozens of lines for a few messages, and about ten a second while a name
// server is unreachable. idemq's own packages log through slog, and so does
// the client once this package is linked, which packages producer/remoting
// and consumer/remoting do: its records at warn and above go to
// [slog.Default] (as it is when each record is logged), with the client's
// fields as attributes.
//
// To see more, lower the level with rlog.SetLogLevel ("debug", "info",
// "warn", "error"); to send the records to another logger, call Route
// before starting any client:
//
//	rmqlog.Route(logger, slog.LevelInfo)
//
// Raise or lower its level later with the returned [*slog.LevelVar].
package rmqlog

import (
	"context"
	"log/slog"
	"slices"

	"github.com/apache/rocketmq-client-go/v2/rlog"
)

// Logger is an rlog.Logger that writes to an slog.Logger the records at
// or above its level.
type Logger struct {
	l     *slog.Logger // nil: slog.Default() when the record is logged
	level *slog.LevelVar
}

var _ rlog.Logger = (*Logger)(nil)

// The client's default logger prints everything at info to standard output.
func init() {
	lv := new(slog.LevelVar)
	lv.Set(slog.LevelWarn)
	rlog.SetLogger(&Logger{level: lv})
}

// New returns a Logger writing to l the records at or above min.
func New(l *slog.Logger, min slog.Level) *Logger {
	lv := new(slog.LevelVar)
	lv.Set(min)
	return &Logger{l: l, level: lv}
}

// Route makes the client log to l, records below min dropped, and returns
// the level to change it later. rlog.SetLogger is not safe to call while
// clients run: call Route before starting any.
func Route(l *slog.Logger, min slog.Level) *slog.LevelVar {
	lg := New(l, min)
	rlog.SetLogger(lg)
	return lg.level
}

// LevelVar is the Logger's level, to change it while clients run.
func (g *Logger) LevelVar() *slog.LevelVar { return g.level }

func (g *Logger) Debug(msg string, fields map[string]any) { g.log(slog.LevelDebug, msg, fields) }
func (g *Logger) Info(msg string, fields map[string]any)  { g.log(slog.LevelInfo, msg, fields) }
func (g *Logger) Warning(msg string, fields map[string]any) {
	g.log(slog.LevelWarn, msg, fields)
}
func (g *Logger) Error(msg string, fields map[string]any) { g.log(slog.LevelError, msg, fields) }

// Fatal logs at error: the client's own logger exits the process there,
// which a library must not do to its host.
func (g *Logger) Fatal(msg string, fields map[string]any) { g.log(slog.LevelError, msg, fields) }

// Level sets the level from the client's names for it, as
// rlog.SetLogLevel passes them; an unknown name changes nothing.
func (g *Logger) Level(level string) {
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
func (g *Logger) OutputPath(string) error { return nil }

func (g *Logger) log(level slog.Level, msg string, fields map[string]any) {
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
