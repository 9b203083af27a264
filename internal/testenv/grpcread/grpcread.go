// Package grpcread reads a test topic with the gRPC client
// (rocketmq-clients/golang/v5) through the test proxy, for tests that
// check what reached the broker.
package grpcread

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	golang "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"

	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
)

// Topic creates topic (one queue) and a group "<topic>-reader" for it on
// the test proxy's broker, and receives and acks the topic's messages with
// a SimpleConsumer until t ends.
func Topic(t *testing.T, topic string) *testkit.Received[*golang.MessageView] {
	t.Helper()
	ep := testenv.RocketMQ5(t)
	testenv.RocketMQ5Topic(t, topic, 1)
	group := topic + "-reader"
	testenv.RocketMQGroup(t, ep.NameServer, group, 0)
	// The proxy refuses a receive whose await is under 3 s with
	// ILLEGAL_POLLING_TIME (seen with 2 s on 5.5.0).
	sc, err := golang.NewSimpleConsumer(&golang.Config{
		Endpoint:      ep.Proxy,
		ConsumerGroup: group,
		Credentials:   &credentials.SessionCredentials{},
	},
		golang.WithSimpleAwaitDuration(5*time.Second),
		golang.WithSimpleSubscriptionExpressions(map[string]*golang.FilterExpression{topic: golang.SUB_ALL}),
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Start(); err != nil {
		t.Fatal(err)
	}
	r := new(testkit.Received[*golang.MessageView])
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			views, err := sc.Receive(ctx, 16, 20*time.Second)
			if err != nil {
				var st *golang.ErrRpcStatus
				if !errors.As(err, &st) && ctx.Err() == nil {
					time.Sleep(100 * time.Millisecond) // not "no new message": do not spin
				}
				continue
			}
			for _, v := range views {
				if err := sc.Ack(ctx, v); err != nil && ctx.Err() == nil {
					t.Errorf("ack %s: %v", v.GetMessageId(), err)
				}
			}
			r.Add(views...)
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		sc.GracefulStop()
	})
	return r
}
