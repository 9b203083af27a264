package remoting

import (
	"context"
	"errors"
	"fmt"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/msgkey"
)

// TransactionProducer wraps a rocketmq.TransactionProducer: it stamps a
// message's key before the half message is sent, so the local transaction
// (ExecuteLocalTransaction), the broker's check-back
// (CheckLocalTransaction) and every consumer see the same key, and a caller
// that sends the same message again after an error keeps it. It does not
// start or shut down the wrapped producer.
type TransactionProducer struct {
	p    rocketmq.TransactionProducer
	keys msgkey.Source
}

// NewTransactionProducer returns a TransactionProducer sending through p
// with keys from keys.
func NewTransactionProducer(p rocketmq.TransactionProducer, keys msgkey.Source) (*TransactionProducer, error) {
	if p == nil || keys == nil {
		return nil, errors.New("remoting: nil transaction producer or key source")
	}
	return &TransactionProducer{p: p, keys: keys}, nil
}

// SendMessageInTransaction stamps msg (see [Producer.Stamp]) and sends it
// as a half message; the producer's TransactionListener then runs the local
// transaction, which can read the key with msgkey.Of(msg).
func (p *TransactionProducer) SendMessageInTransaction(ctx context.Context, msg *primitive.Message) (*primitive.TransactionSendResult, error) {
	if err := stamp(ctx, p.keys, []*primitive.Message{msg}); err != nil {
		return nil, err
	}
	res, err := p.p.SendMessageInTransaction(ctx, msg)
	if err != nil {
		return res, fmt.Errorf("remoting: send in transaction to %s: %w", msg.Topic, err)
	}
	return res, nil
}
