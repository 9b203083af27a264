package testkit

import (
	"context"
	"log/slog"
	"slices"
	"sync"
)

// Logs is an slog.Handler that keeps every record it is given, at every
// level, so that a test can check what a component logged. It ignores
// WithAttrs and WithGroup. It is safe for concurrent use.
type Logs struct {
	mu   sync.Mutex
	recs []slog.Record
}

var _ slog.Handler = (*Logs)(nil)

// Enabled reports true: Logs keeps every level.
func (*Logs) Enabled(context.Context, slog.Level) bool { return true }

// Handle keeps a clone of r.
func (l *Logs) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}

// WithAttrs returns l: the attributes are dropped.
func (l *Logs) WithAttrs([]slog.Attr) slog.Handler { return l }

// WithGroup returns l: the group is dropped.
func (l *Logs) WithGroup(string) slog.Handler { return l }

// Records returns the records kept so far.
func (l *Logs) Records() []slog.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.recs)
}

// Take returns the records kept so far and forgets them.
func (l *Logs) Take() []slog.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.recs
	l.recs = nil
	return r
}

// Messages returns the messages of the records kept so far.
func (l *Logs) Messages() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	msgs := make([]string, len(l.recs))
	for i, r := range l.recs {
		msgs[i] = r.Message
	}
	return msgs
}
