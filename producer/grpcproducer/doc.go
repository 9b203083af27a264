// Package grpcproducer stamps every message sent through RocketMQ 5's gRPC
// client (github.com/apache/rocketmq-clients/golang/v5, which talks to a
// 5.x proxy) with an idempotency key before it is first sent, as package
// producer does for the remoting client.
//
// The key comes from a [msgkey.Source] (a snowflake ID with
// [msgkey.FromIDs]), is stored in the [msgkey.Property] user property and
// added to the message's Keys, by the rule [msgkey.Stamp] owns: a valid key
// the caller set is kept, an invalid one is refused with [msgkey.ErrInvalid]
// and nothing is sent. The client's internal retries and a caller's resend
// of the same *golang.Message keep the key. Read it back with
//
//	key := msgkey.Of(msgkey.Properties(msg.GetProperties()))
//
// which works on a received *golang.MessageView too.
//
// It is a package of its own so that users of the remoting client never
// link gRPC. Linking it routes the gRPC client's logs to slog at warn (see
// package rmqlog/grpcrmqlog).
//
// # Transactions
//
// [Producer.SendWithTransaction] stamps the key before the half message is
// sent, so the local transaction, the broker's check-back (the
// golang.TransactionChecker given to golang.NewProducer, which receives a
// *golang.MessageView) and every consumer see the same key.
//
// # One-way sends
//
// The gRPC client has no one-way send; [Producer.SendAsync] is the closest.
package grpcproducer
