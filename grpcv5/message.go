package grpcv5

import (
	"github.com/apache/rocketmq-clients/golang/v5"

	"github.com/idemq/idemq/consumer"
)

// view is what the adapters read of a received message; *golang.MessageView
// is one. An interface, so that the tests can make messages, which only the
// client's package can build.
type view interface {
	GetMessageId() string
	GetTopic() string
	GetBody() []byte
	GetProperties() map[string]string
	GetTag() *string
	GetKeys() []string
	GetDeliveryAttempt() int32
}

var _ view = (*golang.MessageView)(nil)

// describe is v as the Consumer sees it. A delivery attempt counts from 1;
// the Consumer counts earlier deliveries, as the broker's reconsume times.
// Raw is v.
func describe[V view](v V) consumer.Message {
	m := consumer.Message{
		ID:         v.GetMessageId(),
		Topic:      v.GetTopic(),
		Keys:       v.GetKeys(),
		Properties: v.GetProperties(),
		Body:       v.GetBody(),
		Reconsumed: max(v.GetDeliveryAttempt()-1, 0),
		Raw:        v,
	}
	if tag := v.GetTag(); tag != nil {
		m.Tag = *tag
	}
	return m
}

// UniqKey is a 5.x message's id, the unique key the client generated when
// the message was first sent (its consumer.Message's ID): a fallback key for
// consumer.WithKeyFallback, named as package remoting's.
func UniqKey(m *consumer.Message) string { return m.ID }
