package testenv

import "testing"

// TestKafkaClusterID checks that no cluster id begins with '-': the
// storage tool would read it as an option and refuse to format.
func TestKafkaClusterID(t *testing.T) {
	for range 10_000 {
		if id := kafkaClusterID(); len(id) != 22 || id[0] == '-' {
			t.Fatalf("cluster id %q", id)
		}
	}
}
