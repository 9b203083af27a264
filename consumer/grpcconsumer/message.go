package grpcconsumer

import (
	"context"

	"github.com/apache/rocketmq-clients/golang/v5"

	"github.com/idemq/idemq/consumer"
	// Routes the client's logs to slog at warn (see its doc).
	_ "github.com/idemq/idemq/rmqlog/grpcrmqlog"
)

// Handler processes one message. A nil error acknowledges it; any error
// has it delivered again. It must not acknowledge the message itself or
// change its invisible duration.
type Handler func(ctx context.Context, m *golang.MessageView) error

// view is what the adapters read of a received message; *golang.MessageView
// is one. An interface, so that the tests can make messages, which only the
// client's package can build.
type view interface {
	GetMessageId() string
	GetTopic() string
	GetBody() []byte
	GetProperties() map[string]string
	GetDeliveryAttempt() int32
}

// describe is v as the Consumer sees it. A delivery attempt counts from 1;
// the Consumer counts earlier deliveries, as the broker's reconsume times.
func describe[V view](v V) consumer.Message {
	return consumer.Message{
		ID:         v.GetMessageId(),
		Topic:      v.GetTopic(),
		Body:       v.GetBody(),
		Properties: v.GetProperties(),
		Reconsumed: max(v.GetDeliveryAttempt()-1, 0),
	}
}
