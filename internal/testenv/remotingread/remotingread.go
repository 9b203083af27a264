// Package remotingread reads a test topic with the remoting client
// (rocketmq-client-go/v2), for tests that check what reached the broker.
package remotingread

import (
	"context"
	"testing"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	rmqconsumer "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
)

// Topic creates topic with queues queues on the brokers of the name server
// at ns and consumes it from its first offset, with a push consumer of
// group "<topic>-reader", until t ends.
func Topic(t *testing.T, ns, topic string, queues int) *testkit.Received[*primitive.MessageExt] {
	t.Helper()
	if err := testenv.CreateRocketMQTopic(t.Context(), ns, topic, queues); err != nil {
		t.Fatal(err)
	}
	r := new(testkit.Received[*primitive.MessageExt])
	c, err := rocketmq.NewPushConsumer(
		rmqconsumer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns})),
		rmqconsumer.WithGroupName(topic+"-reader"),
		rmqconsumer.WithInstance(topic+"-reader"),
		rmqconsumer.WithConsumeFromWhere(rmqconsumer.ConsumeFromFirstOffset),
	)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Subscribe(topic, rmqconsumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (rmqconsumer.ConsumeResult, error) {
		r.Add(msgs...)
		return rmqconsumer.ConsumeSuccess, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Shutdown() })
	return r
}
