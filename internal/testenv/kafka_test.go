package testenv_test

import (
	"testing"
	"time"

	"github.com/idemq/idemq/internal/testenv"
)

// TestPrivateKafkaKillAndStart starts two nodes, kills the second with
// SIGKILL and starts it again on its data: each time the cluster lists
// exactly the nodes that are up.
func TestPrivateKafkaKillAndStart(t *testing.T) {
	t.Parallel()
	k := testenv.StartPrivateKafka(t, 2)
	brokers := k.Brokers()
	if len(brokers) != 2 {
		t.Fatalf("brokers %v, want 2", brokers)
	}
	if ids := testenv.KafkaBrokerIDs(t, brokers[0]); len(ids) != 2 {
		t.Fatalf("live brokers %v, want both", ids)
	}
	if err := k.Kill(1); err != nil {
		t.Fatal(err)
	}
	// The controller fences the dead node after broker.session.timeout.ms.
	deadline := time.Now().Add(time.Minute)
	for ids := testenv.KafkaBrokerIDs(t, brokers[0]); len(ids) != 1; ids = testenv.KafkaBrokerIDs(t, brokers[0]) {
		if time.Now().After(deadline) {
			t.Fatalf("live brokers %v a minute after the kill, want node 0 alone", ids)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := k.Start(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	if ids := testenv.KafkaBrokerIDs(t, brokers[1]); len(ids) != 2 {
		t.Fatalf("live brokers %v after the restart, want both", ids)
	}
}
