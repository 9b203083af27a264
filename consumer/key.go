package consumer

import (
	"errors"
	"fmt"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/msgkey"
)

// ErrNoKey reports a message that carries no idempotency key.
var ErrNoKey = errors.New("consumer: message has no idempotency key")

// KeyFunc extracts a key from a message, or "" when it has none.
type KeyFunc func(*primitive.MessageExt) string

// UniqKey is the client-generated UNIQ_KEY property. The client sets it on a
// message value the first time it is sent, so it survives retries and a
// resend of the same value, but not a message rebuilt for a resend, and
// messages sent in a batch get none: a fallback, not a substitute for a key
// stamped by package producer.
func UniqKey(m *primitive.MessageExt) string {
	return m.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex)
}

// MsgID is the message id the broker reports (the UNIQ_KEY when present,
// else the offset message id, which differs for every stored copy).
func MsgID(m *primitive.MessageExt) string { return m.MsgId }

// keyFunc returns the key lookup: the [msgkey.Property], then fallbacks.
func keyFunc(fallbacks []KeyFunc) func(*primitive.MessageExt) (string, error) {
	return func(m *primitive.MessageExt) (string, error) {
		if k := msgkey.Of(m); k != "" {
			return k, nil
		}
		for _, f := range fallbacks {
			if k := f(m); k != "" {
				return k, nil
			}
		}
		return "", fmt.Errorf("%w: no %s property (msgId %s)", ErrNoKey, msgkey.Property, m.MsgId)
	}
}
