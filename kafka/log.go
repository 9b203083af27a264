package kafka

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
)

// NewLogger returns a kgo.Logger, for kgo.WithLogger, that passes franz-go's
// warnings and errors to l and drops the rest: the client's info and debug
// records are the chatter of every connection and metadata refresh. A nil
// l is [slog.Default], as it is when each record is logged.
//
// A [Receiver] routes its own client's log to its Consumer's logger this
// way unless the options it is given say otherwise.
func NewLogger(l *slog.Logger) kgo.Logger { return logger{l} }

type logger struct{ l *slog.Logger }

func (logger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (g logger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lvl := slog.LevelWarn
	switch level {
	case kgo.LogLevelError:
		lvl = slog.LevelError
	case kgo.LogLevelWarn:
	default:
		return
	}
	l := g.l
	if l == nil {
		l = slog.Default()
	}
	l.Log(context.Background(), lvl, "kafka: "+msg, keyvals...)
}
