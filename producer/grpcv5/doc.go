// Package grpcv5 wraps the producer of RocketMQ's 5.x gRPC client,
// github.com/apache/rocketmq-clients/golang/v5 (through a 5.x proxy), so
// that every message is stamped with its idempotency key before its first
// send (see package producer):
//
//	p, err := grpcv5.New(golangProducer, msgkey.FromIDs(gen))
//	...
//	_, err = p.Send(ctx, msg)
//	key := msgkey.Of(msgkey.Properties(msg.GetProperties()))
//
// [Producer] wraps Send, SendAsync and the transactional
// SendWithTransaction; the gRPC client has no one-way send. Read a key back
// from a received *golang.MessageView the same way. The package links no
// remoting client; linking it routes the gRPC client's logs to slog at warn
// (see package rmqlog/grpcrmqlog).
package grpcv5
