package grpcv5

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	_ "unsafe" // go:linkname

	_ "github.com/apache/rocketmq-clients/golang/v5" // initialized first: its init builds the logger replaced here
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// base is the client's package-level logger (golang.sugarBaseLogger): the
// package logs through it and each client takes it when created. The
// client has no setter for it, so it is reached by name; if a client
// version renames it, linking fails rather than logging to files again.
//
//go:linkname base github.com/apache/rocketmq-clients/golang/v5.sugarBaseLogger
var base *zap.SugaredLogger

// route is where records go: l (nil: slog.Default()) from level up.
type route struct {
	l     *slog.Logger
	level *slog.LevelVar
}

var current atomic.Pointer[route]

// levelEnv is the client's variable for its level; it is honoured at start.
const levelEnv = "rocketmq.client.logLevel"

func init() {
	min := slog.LevelWarn
	switch strings.ToLower(os.Getenv(levelEnv)) {
	case "debug":
		min = slog.LevelDebug
	case "info":
		min = slog.LevelInfo
	case "error":
		min = slog.LevelError
	}
	RouteLogs(nil, min)
	// The client logs Fatal only if registering its metric views fails;
	// zap would exit the process there, which a library must not do to
	// its host.
	base = zap.New(core{}, zap.WithFatalHook(noExit{})).Sugar()
}

// RouteLogs sends the gRPC client's records at or above min to l (nil:
// [slog.Default] as it is when each record is logged) and returns the
// level, to change it later.
//
// The routing itself happens when the program starts: the client offers
// no way to hand it a logger and each client takes the package-level
// logger when it is created, so linking this package replaces that logger
// at init, before any client exists, and from then on the client logs to
// slog at warn (or at the level of the client's variable
// rocketmq.client.logLevel) and writes no log file. RouteLogs only changes
// where those records go and from which level: it is safe to call at any
// time, and clients already running log to the new route too. The client's
// ResetLogger or InitLogger undoes the routing for clients created
// afterwards.
func RouteLogs(l *slog.Logger, min slog.Level) *slog.LevelVar {
	lv := new(slog.LevelVar)
	lv.Set(min)
	current.Store(&route{l: l, level: lv})
	return lv
}

// core is the zap core behind base: it hands enabled entries to the
// current route's slog handler.
type core struct {
	attrs []slog.Attr // from With, in order
}

func (c core) Enabled(l zapcore.Level) bool {
	return level(l) >= current.Load().level.Level()
}

func (c core) With(fields []zapcore.Field) zapcore.Core {
	return core{attrs: append(c.attrs[:len(c.attrs):len(c.attrs)], attrs(fields)...)}
}

func (c core) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c core) Write(e zapcore.Entry, fields []zapcore.Field) error {
	ctx := context.Background()
	r := current.Load()
	lv := level(e.Level)
	l := r.l
	if l == nil {
		l = slog.Default()
	}
	if lv < r.level.Level() || !l.Enabled(ctx, lv) {
		return nil
	}
	rec := slog.NewRecord(e.Time, lv, e.Message, 0)
	rec.AddAttrs(slog.String("source", "rocketmq-clients/golang/v5"))
	rec.AddAttrs(c.attrs...)
	rec.AddAttrs(attrs(fields)...)
	return l.Handler().Handle(ctx, rec)
}

func (c core) Sync() error { return nil }

// level maps zap's levels to slog's; the panic and fatal levels are errors.
func level(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelError
}

// attrs turns zap fields into slog attributes, in order.
func attrs(fields []zapcore.Field) []slog.Attr {
	out := make([]slog.Attr, 0, len(fields))
	for _, f := range fields {
		enc := zapcore.NewMapObjectEncoder()
		f.AddTo(enc)
		for k, v := range enc.Fields {
			out = append(out, slog.Any(k, v))
		}
	}
	return out
}

// noExit is a fatal hook that returns: the record is logged, at error.
type noExit struct{}

func (noExit) OnWrite(*zapcore.CheckedEntry, []zapcore.Field) {}
