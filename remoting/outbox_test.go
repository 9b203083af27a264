package remoting_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	rmqproducer "github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/outbox"
	"github.com/idemq/idemq/remoting"
)

// TestSendBatchRefusedBeforeTheWire checks the batches SendBatch (and Send,
// for one message) refuses without sending: the producer is never started, and its name server
// cannot be reached, so a send would fail otherwise.
func TestSendBatchRefusedBeforeTheWire(t *testing.T) {
	if _, err := remoting.NewOutboxSender(nil); err == nil {
		t.Fatal("NewOutboxSender(nil) succeeded")
	}
	rp, err := rocketmq.NewProducer(rmqproducer.WithNsResolver(primitive.NewPassthroughResolver([]string{"127.0.0.1:1"})))
	if err != nil {
		t.Fatal(err)
	}
	s, err := remoting.NewOutboxSender(rp)
	if err != nil {
		t.Fatal(err)
	}
	keyed := func(key string, props map[string]string) *outbox.Message {
		m := &outbox.Message{Topic: "orders", Body: []byte("x"), Keys: []string{key}, Properties: map[string]string{msgkey.Property: key}}
		for k, v := range props {
			m.Properties[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name    string
		msgs    []*outbox.Message
		refused bool
		want    string
	}{
		{"Empty", nil, false, "empty batch"},
		{"PropertiesOverLimit", []*outbox.Message{keyed("a", nil), keyed("b", map[string]string{"big": strings.Repeat("p", 40<<10)})}, true, "properties of"},
		// The outbox takes Kafka's and NATS's dotted names.
		{"DottedTopic", []*outbox.Message{{Topic: "orders.created", Body: []byte("x")}}, true, "RocketMQ takes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.SendBatch(context.Background(), tc.msgs)
			if err == nil || errors.Is(err, outbox.ErrRefused) != tc.refused || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("SendBatch = %v, want an error with %q, refused %v", err, tc.want, tc.refused)
			}
			if len(tc.msgs) == 1 {
				if err := s.Send(context.Background(), tc.msgs[0]); !errors.Is(err, outbox.ErrRefused) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Send = %v, want a refusal with %q", err, tc.want)
				}
			}
		})
	}
}
