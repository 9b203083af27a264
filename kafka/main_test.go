package kafka_test

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
)

// A child runs its role (see fixture_test.go) and exits.
func TestMain(m *testing.M) {
	racechild.Main(map[string]func() error{"receiver": receiverChild})
	os.Exit(testenv.Run(m))
}

// seq makes names unique within this process.
var seq atomic.Int64

// unique returns a name of prefix unique to this run and process.
func unique(prefix string) string {
	return fmt.Sprintf("%s-%d-%d-%d", prefix, os.Getpid(), time.Now().UnixNano(), seq.Add(1))
}

// client is a client of brokers, closed when the test ends.
func client(t testing.TB, brokers []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// createTopic creates topic with partitions on brokers.
func createTopic(t testing.TB, brokers []string, topic string, partitions int32) {
	t.Helper()
	adm := kadm.NewClient(client(t, brokers))
	res, err := adm.CreateTopic(t.Context(), partitions, -1, nil, topic)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	// The broker learns of the topic from the controller a moment after
	// the creation is answered; a produce meanwhile is refused with
	// UNKNOWN_TOPIC_OR_PARTITION, which franz-go retries only a few times
	// (under load, not enough: the conformance suite failed so once).
	testkit.WaitFor(t, "topic "+topic+" served", func() bool {
		td, err := adm.ListTopics(t.Context(), topic)
		d, ok := td[topic]
		if err != nil || !ok || d.Err != nil || len(d.Partitions) != int(partitions) {
			return false
		}
		for _, p := range d.Partitions {
			if p.Err != nil || p.Leader < 0 {
				return false
			}
		}
		return true
	})
}
