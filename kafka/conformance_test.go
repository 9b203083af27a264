package kafka_test

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/internal/adaptertest"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/kafka"
	"github.com/idemq/idemq/msgkey"
)

// TestConformance runs the adapters' conformance suite
// (internal/adaptertest) against a Receiver: on topics of 4 partitions,
// each record's key its partitioning key, and on topics of one partition,
// whose order the Order case checks.
func TestConformance(t *testing.T) {
	brokers := []string{testenv.Kafka(t)}
	for _, tc := range []struct {
		name       string
		partitions int32
	}{{"Partitions4", 4}, {"Ordered", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			adaptertest.Run(t, adaptertest.Harness{Ordered: tc.partitions == 1, New: func(t *testing.T) adaptertest.Env {
				return conformanceEnv(t, brokers, tc.partitions)
			}})
		})
	}
}

// conformanceEnv is a fresh topic of partitions and a group.
func conformanceEnv(t *testing.T, brokers []string, partitions int32) adaptertest.Env {
	topic, group := unique("conf"), unique("conf-group")
	createTopic(t, brokers, topic, partitions)
	p, err := kafka.NewProducer(client(t, brokers), testkit.Keys(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	return adaptertest.Env{
		Group: group,
		Send: func(t *testing.T, keys ...string) {
			rs := make([]*kgo.Record, len(keys))
			for i, k := range keys {
				rs[i] = &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte("order " + k),
					Headers: []kgo.RecordHeader{{Key: msgkey.Property, Value: []byte(k)}}}
			}
			if _, err := p.ProduceSync(t.Context(), rs...); err != nil {
				t.Fatalf("send %s: %v", strings.Join(keys, " "), err)
			}
		},
		Start: func(t *testing.T, c *consumer.Consumer, h consumer.Handler, batch bool) func(context.Context) error {
			cfg := kafka.ReceiverConfig{}
			if batch {
				cfg.BatchSize = 16
			}
			r, err := kafka.NewReceiver(c, h, cfg, kgo.SeedBrokers(brokers...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic))
			if err != nil {
				t.Fatal(err)
			}
			go r.Run(context.Background())
			return r.Drain
		},
	}
}
