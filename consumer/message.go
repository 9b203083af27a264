package consumer

import (
	"errors"
	"fmt"

	"github.com/idemq/idemq/msgkey"
)

// Message is one delivered message, whichever client delivered it: what a
// [Handler] reads, and what the Consumer needs to find its key, check
// its payload, decide and report. The client adapters fill it in.
type Message struct {
	// ID is the client's message id, logged and on the message's span. A
	// 5.x client's is the unique key the client generated when the message
	// was first sent; the remoting client's is that key (UNIQ_KEY) when
	// present, else the offset message id, which differs for every stored
	// copy.
	ID    string
	Topic string
	// Tag is the message's tag, "" when it has none.
	Tag string
	// Keys are the message's keys, which the broker indexes; a key stamped
	// by a client adapter's Producer is among them.
	Keys []string
	// Properties are the message's properties, where its key is read from
	// ([msgkey.Property]). The remoting client's include its system
	// properties (UNIQ_KEY, KEYS, TAGS, …); the gRPC client's are the user
	// properties alone.
	Properties map[string]string
	// Body is fingerprinted (see [WithoutFingerprint]); its size goes on
	// the span.
	Body []byte
	// Reconsumed is how many times the message was delivered before (the
	// broker's reconsume times; a 5.x client's delivery attempt minus one):
	// on its last reconsume ([WithMaxReconsumeTimes]) a busy key is always
	// waited for.
	Reconsumed int32
	// Raw is the client's own message, for what the fields above leave
	// out: a *primitive.MessageExt from rocketmq-client-go, a
	// *golang.MessageView from rocketmq-clients/golang/v5.
	Raw any
}

// GetProperty returns the property name, or "": with it a *Message is a
// message whose properties msgkey.Of reads: msgkey.Of(msg) is its key.
func (m *Message) GetProperty(name string) string { return m.Properties[name] }

// errNoKey reports a message that carries no idempotency key.
var errNoKey = errors.New("consumer: message has no idempotency key")

// key returns m's key: the [msgkey.Property], else the first fallback's
// answer.
func (m *Message) key(fallbacks []func(*Message) string) (string, error) {
	if k := msgkey.Of(m); k != "" {
		return k, nil
	}
	for _, f := range fallbacks {
		if k := f(m); k != "" {
			return k, nil
		}
	}
	return "", fmt.Errorf("%w: no %s property (msgId %s)", errNoKey, msgkey.Property, m.ID)
}
