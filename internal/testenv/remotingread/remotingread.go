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
	"github.com/idemq/idemq/msgkey"
)

// Topic creates topic with queues queues on the brokers of the name server
// at ns and consumes it from its first offset, with a push consumer of
// group "<topic>-reader", until t ends.
func Topic(t *testing.T, ns, topic string, queues int) *testkit.Received[*primitive.MessageExt] {
	t.Helper()
	create(t, ns, topic, queues)
	r := new(testkit.Received[*primitive.MessageExt])
	read(t, ns, topic, topic+"-reader", r.Add)
	return r
}

// DeadLetters counts, by key (msgkey.Of), the messages a group
// dead-lettered. It is safe for concurrent use.
type DeadLetters struct {
	r testkit.Received[string]
}

// Keys returns how many times each key was dead-lettered so far.
func (d *DeadLetters) Keys() map[string]int {
	n := map[string]int{}
	for _, k := range d.r.Snapshot() {
		n[k]++
	}
	return n
}

// WatchDeadLetters creates group's dead-letter topic on the brokers of the
// name server at ns, readable (the broker would create it write-only), and
// consumes it from its first offset, with a push consumer of group watcher,
// until t ends.
func WatchDeadLetters(t *testing.T, ns, group, watcher string) *DeadLetters {
	t.Helper()
	create(t, ns, "%DLQ%"+group, 1)
	// Known before the watcher starts, which would otherwise learn of it
	// only at its 30 s route refresh.
	create(t, ns, "%RETRY%"+watcher, 1)
	d := new(DeadLetters)
	read(t, ns, "%DLQ%"+group, watcher, func(msgs ...*primitive.MessageExt) {
		for _, m := range msgs {
			d.r.Add(msgkey.Of(m))
		}
	})
	return d
}

// create creates topic with queues queues on the brokers of the name
// server at ns.
func create(t *testing.T, ns, topic string, queues int) {
	t.Helper()
	if err := testenv.CreateRocketMQTopic(t.Context(), ns, topic, queues); err != nil {
		t.Fatal(err)
	}
}

// read consumes topic from its first offset with a push consumer of group,
// giving each batch to add, until t ends.
func read(t *testing.T, ns, topic, group string, add func(...*primitive.MessageExt)) {
	t.Helper()
	c, err := rocketmq.NewPushConsumer(
		rmqconsumer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns})),
		rmqconsumer.WithGroupName(group),
		rmqconsumer.WithInstance(group),
		rmqconsumer.WithConsumeFromWhere(rmqconsumer.ConsumeFromFirstOffset),
	)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Subscribe(topic, rmqconsumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (rmqconsumer.ConsumeResult, error) {
		add(msgs...)
		return rmqconsumer.ConsumeSuccess, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Shutdown() })
}

// PushConsumer returns a push consumer of group on the name server ns,
// named instance (client ids are shared per process and must differ
// between the processes of a group), that reads new groups' queues from
// the start. opts come after its own.
func PushConsumer(ns, group, instance string, opts ...rmqconsumer.Option) (rocketmq.PushConsumer, error) {
	return rocketmq.NewPushConsumer(append([]rmqconsumer.Option{
		rmqconsumer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns})),
		rmqconsumer.WithGroupName(group),
		rmqconsumer.WithInstance(instance),
		rmqconsumer.WithConsumeFromWhere(rmqconsumer.ConsumeFromFirstOffset),
	}, opts...)...)
}
