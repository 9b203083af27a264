// Package producer stamps every RocketMQ message with an idempotency key
// before it is first sent, whichever client sends it; packages
// remoting (rocketmq-client-go/v2) and grpcv5
// (rocketmq-clients/golang/v5) wrap each client's producer with a
// [Stamper]:
//
//	p, err := remoting.NewProducer(rocketmqProducer, msgkey.FromIDs(gen))
//	...
//	_, err = p.SendSync(ctx, msg) // stamped, then sent
//
// The key is generated once per message, before its first send, stored in
// the [msgkey.Property] user property and added to the message's Keys so
// that the broker indexes it. The client's internal retries and a caller's
// resend of the same message value keep it, so a consumer using package
// consumer applies the message's effect once. A key the caller set before
// sending (a business key such as an order number) is kept. This package
// links no RocketMQ client.
//
// [NewStamper] and the adapters' constructors take what they need (the
// client's producer, a [msgkey.Source]) as parameters and have no other
// settings. There is no default key source: [msgkey.FromIDs] over an ID
// generator (package idgen, on a node id of the process's own) is the usual
// one. Package remoting's ExampleNewProducer is a whole sender, its
// node leased from Redis.
package producer

import (
	"context"
	"errors"

	"github.com/idemq/idemq/msgkey"
)

// Stamper gives messages their keys from a [msgkey.Source]. It is safe for
// concurrent use, but not for stamping one message from two goroutines at
// once (stamping writes to the message).
type Stamper struct{ keys msgkey.Source }

// NewStamper returns a Stamper whose new keys come from keys.
func NewStamper(keys msgkey.Source) (*Stamper, error) {
	if keys == nil {
		return nil, errors.New("producer: nil key source")
	}
	return &Stamper{keys: keys}, nil
}

// Stamp gives m its key and returns it: the key m carries already (a
// business key, or the key of an earlier attempt, so that every resend
// carries the same one), else a new one, validated, in [msgkey.Property]
// and among m's Keys. Stamping a message again changes nothing. On error m
// is unchanged: an invalid key wraps [msgkey.ErrInvalid], and the key
// source's error is wrapped. A producer adapter stamps every message before
// its first send, and sends nothing when stamping fails.
func (s *Stamper) Stamp(ctx context.Context, m msgkey.Message) (string, error) {
	return msgkey.Stamp(ctx, m, s.keys.NextKey)
}
