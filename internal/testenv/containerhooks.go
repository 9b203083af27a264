package testenv

import "context"

// The hooks below serve internal/testenv/containers, the container twin of
// withservers: its stand-in images carry the very server files this
// package runs, and its harness waits for a Kafka container as this
// package waits for a local node.

// KafkaInstall returns the directory holding the jars of the Apache Kafka
// release the tests run (4.4.0), resolving them with Maven on first use
// into $IDEMQ_CACHE_DIR/kafka-4.4.0/lib (see [installJars]).
func KafkaInstall(ctx context.Context) (string, error) {
	return installJars(ctx, "kafka", "kafka-"+kafkaRelease, kafkaPOM, "-Dkafka.version="+kafkaRelease)
}

// NATSInstall returns the nats-server binary of the release the tests run
// (v2.15.3): the one on PATH, else the one built from its Go module into
// $IDEMQ_CACHE_DIR on first use (see [natsInstall]).
func NATSInstall(ctx context.Context) (string, error) { return natsInstall(ctx) }

// KafkaLiveBrokers returns the node ids of the live brokers the Kafka
// broker at addr knows, from a Metadata request: a node is listed once it
// is registered and unfenced, and then serves produce and fetch requests.
func KafkaLiveBrokers(ctx context.Context, addr string) ([]int32, error) {
	return kafkaBrokerIDs(ctx, addr)
}
