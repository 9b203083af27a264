package natsjs

import (
	"log/slog"

	"github.com/nats-io/nats.go"
)

// RouteLogs returns a connection option that sends what nats.go reports
// through its callbacks to l: asynchronous errors (such as a slow
// consumer, which nats.go otherwise writes to stderr), disconnections
// with an error, and lame-duck mode at WARN; reconnections at INFO; the
// close at DEBUG. Pass it to nats.Connect:
//
//	nc, err := nats.Connect(url, natsjs.RouteLogs(logger))
//
// A later option that sets one of these callbacks replaces it.
func RouteLogs(l *slog.Logger) nats.Option {
	return func(o *nats.Options) error {
		o.AsyncErrorCB = func(nc *nats.Conn, sub *nats.Subscription, err error) {
			attrs := []any{"err", err}
			if sub != nil {
				attrs = append(attrs, "subject", sub.Subject)
			}
			l.Warn("nats: asynchronous error", attrs...)
		}
		o.DisconnectedErrCB = func(nc *nats.Conn, err error) {
			if err != nil {
				l.Warn("nats: disconnected", "err", err)
			}
		}
		o.ReconnectedCB = func(nc *nats.Conn) { l.Info("nats: reconnected", "server", nc.ConnectedUrlRedacted()) }
		o.ClosedCB = func(*nats.Conn) { l.Debug("nats: connection closed") }
		o.LameDuckModeHandler = func(nc *nats.Conn) {
			l.Warn("nats: server entering lame duck mode", "server", nc.ConnectedUrlRedacted())
		}
		return nil
	}
}
