package consumer

import (
	"errors"
	"fmt"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/msgkey"
)

// ErrNoKey reports a message that carries no idempotency key.
var ErrNoKey = errors.New("consumer: message has no idempotency key")

// KeyFunc extracts a key from a message, or "" when it has none. For a
// message that another client delivered ([Consumer.Process]) it sees a
// MessageExt with that message's topic, body and user properties, and its
// [Message.ID] as MsgId and as the UNIQ_KEY property (a 5.x message id is
// the client-generated unique key), so that [UniqKey] and [MsgID] work for
// both.
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

// key returns m's key: the [msgkey.Property], else the first fallback's
// answer.
func (m *Message) key(fallbacks []KeyFunc) (string, error) {
	var k string
	if m.ext != nil {
		k = msgkey.Of(m.ext)
	} else {
		k = msgkey.Of(msgkey.Properties(m.Properties))
	}
	if k != "" {
		return k, nil
	}
	if len(fallbacks) > 0 {
		ext := m.ext
		if ext == nil {
			ext = m.asExt()
		}
		for _, f := range fallbacks {
			if k := f(ext); k != "" {
				return k, nil
			}
		}
	}
	return "", fmt.Errorf("%w: no %s property (msgId %s)", ErrNoKey, msgkey.Property, m.ID)
}

// asExt is m as the fallbacks read it: topic, body and user properties,
// and its id as MsgId and as the UNIQ_KEY (a 5.x message id is the
// client-generated unique key).
func (m *Message) asExt() *primitive.MessageExt {
	props := make(map[string]string, len(m.Properties)+1)
	for k, v := range m.Properties {
		props[k] = v
	}
	if props[primitive.PropertyUniqueClientMessageIdKeyIndex] == "" && m.ID != "" {
		props[primitive.PropertyUniqueClientMessageIdKeyIndex] = m.ID
	}
	ext := &primitive.MessageExt{Message: primitive.Message{Topic: m.Topic, Body: m.Body}, MsgId: m.ID, ReconsumeTimes: m.Reconsumed}
	ext.WithProperties(props)
	return ext
}
