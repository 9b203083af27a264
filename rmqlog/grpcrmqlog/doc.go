// Package grpcrmqlog routes the logs of RocketMQ's gRPC client
// (github.com/apache/rocketmq-clients/golang/v5) to log/slog, at warn and
// above by default. Linking it is enough; packages producer/grpcv5
// and consumer/grpcv5 do:
//
//	import _ "github.com/idemq/idemq/rmqlog/grpcrmqlog"
//
// Left alone, the client logs at info through zap to
// $HOME/logs/rocketmq/rocketmq_client_go.log (rotated, up to 10 files of
// 100 MB), or to standard output when the environment variable
// mq.consoleAppender.enabled is "true": a connection and settings line per
// client, and a line per failed attempt. It offers no way to hand it a
// logger (its ResetLogger rebuilds that file logger from the environment),
// so this package replaces the client's package-level logger when the
// program starts, before any client exists. Records then go to
// [slog.Default] (as it is when each record is logged) with the client's
// fields as attributes, and no log file is written. It is a separate
// package from rmqlog so that users of the remoting client never link gRPC.
//
// # Levels
//
// The starting level is warn, or the one the client's own variable
// rocketmq.client.logLevel names ("debug", "info", "warn", "error"). To see
// more, or to send the records to another logger, call [Route] at any time,
// also while clients run:
//
//	grpcrmqlog.Route(nil, slog.LevelInfo) // slog.Default, from info up
//
// and change the level later through the returned [*slog.LevelVar]. The
// slog handler's own level applies too.
//
// Calling the client's ResetLogger or InitLogger undoes the routing for
// clients created afterwards.
package grpcrmqlog
