package containers

import (
	"strings"
	"testing"
)

// TestKafkaEnv checks that apache/kafka's image turns each variable the
// harness sets back into its property, by the image's rule
// (kafka.docker.KafkaDockerWrapper.getServerConfigsFromEnv).
func TestKafkaEnv(t *testing.T) {
	image := func(env string) string {
		return strings.NewReplacer("...", "-", "..", "_").Replace(
			strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(env, "KAFKA_")), "_", "."))
	}
	for _, p := range append(kafkaSettings, "listeners", "advertised.listeners", "a_b-c.d") {
		name, _, _ := strings.Cut(p, "=")
		if got := image(kafkaEnv(name)); got != name {
			t.Errorf("kafkaEnv(%q) = %q, which the image reads as %q", name, kafkaEnv(name), got)
		}
	}
}
