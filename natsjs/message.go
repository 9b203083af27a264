package natsjs

import (
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemq/idemq/consumer"
)

// describe is m as the Consumer sees it: its subject as the topic, its
// headers (first values) as the properties, its stream sequence as the
// id, and its earlier deliveries (NumDelivered counts from 1) as the
// reconsume times. Raw is m.
func describe(m jetstream.Msg) consumer.Message {
	msg := consumer.Message{Topic: m.Subject(), Body: m.Data(), Raw: m}
	if h := m.Headers(); len(h) > 0 {
		msg.Properties = make(map[string]string, len(h))
		for name, vs := range h {
			if len(vs) > 0 {
				msg.Properties[name] = vs[0]
			}
		}
	}
	// A message a pull consumer delivers always has metadata: its reply
	// subject is the server's acknowledgement subject.
	if md, err := m.Metadata(); err == nil {
		msg.ID = md.Stream + ":" + strconv.FormatUint(md.Sequence.Stream, 10)
		msg.Reconsumed = int32(min(max(md.NumDelivered, 1)-1, 1<<31-1))
	}
	return msg
}

// MsgID is a message's id (its Nats-Msg-Id header), which the publisher
// set for the stream's duplicate window: a fallback key for
// consumer.WithKeyFallback, for messages published without a [Producer].
func MsgID(m *consumer.Message) string { return m.Properties[jetstream.MsgIDHeader] }
