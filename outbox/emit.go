package outbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/msgkey"
)

// Emit adds m to the outbox from a handler of the transactional mode
// (consumer.Consumer.Tx), in the handler's own transaction, with a key
// derived from the message being handled ([msgkey.Derive] of its key, its
// consumer group and name), and returns that key. The row commits with the
// handler's writes and the record of its message, or not at all; and a
// handler that runs again for the same message — its record forgotten, its
// topic replayed — emits the same key, so the consumers downstream apply
// the copy once: a chain of services is exactly-once in effect hop by hop.
//
// name tells apart the messages one handler emits (see [msgkey.Derive]).
// m must not carry a key of its own. Emit fails, writing nothing, outside
// a transactional handler's context, for a handler that runs without a
// claim (dedupe.GuardConfig.FailOpen while the store is down), for an
// invalid name (wrapping [msgkey.ErrInvalid]) and for a message [Outbox.Add]
// refuses; the handler should return the error, so that its transaction
// rolls back and the message is retried.
func (o *Outbox) Emit(ctx context.Context, name string, m Message) (string, error) {
	t, tx, _ := dedupe.ClaimFromContext(ctx)
	switch {
	case tx == nil:
		return "", errors.New("outbox: Emit outside a transactional handler: emit from a handler made by consumer.Consumer.Tx, whose transaction records the message's key")
	case t.Key == "":
		return "", errors.New("outbox: Emit from a handler running without a claim (the dedupe store is down and FailOpen is set): no key to derive from; return the error to retry")
	case msgkey.Of(msgkey.Properties(m.Properties)) != "":
		return "", fmt.Errorf("%w: Emit derives the key; the message carries %s already", ErrInvalidMessage, msgkey.Property)
	}
	group := t.Group
	if t.Namespace != "" {
		group = t.Namespace + "/" + t.Group
	}
	key, err := msgkey.Derive(t.Key, group, name)
	if err != nil {
		return "", fmt.Errorf("outbox: Emit %q: %w", name, err)
	}
	// m carries no key: Add's stamping takes the derived one.
	keys, err := o.add(ctx, tx, []Message{m}, func(context.Context) (string, error) { return key, nil })
	if err != nil {
		return "", err
	}
	return keys[0], nil
}
