package containers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/go-connections/nat"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/exec"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/idemq/idemq/internal/testenv"
)

// Kafka runs as apache/kafka's image runs it: its command configures the
// server from KAFKA_* variables (KAFKA_LOG_DIRS for log.dirs), formats the
// storage and starts one KRaft node, here broker and controller in one.
//
// A client reaches a broker at the address the broker advertises, not at
// the one it was given. As the RocketMQ brokers do, the node listens inside
// its container on a port that is free on the host, published under the
// same number, and advertises 127.0.0.1 and that port: clients on the host
// reach it as they reach testenv's local node. The controller's port is
// seen inside the container only.

// kafkaSettings are the node's settings but its listeners: testenv's for
// its local node (internal/testenv/kafka.go's config), 4 partitions per
// topic created on first use, the internal topics small and on the one
// node.
var kafkaSettings = []string{
	"node.id=1",
	"process.roles=broker,controller",
	"controller.listener.names=CONTROLLER",
	"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
	"inter.broker.listener.name=PLAINTEXT",
	"controller.quorum.voters=1@localhost:9093",
	// Not the image's /var/lib/kafka/data, a volume: the data goes with
	// the container.
	"log.dirs=/tmp/kraft-combined-logs",
	"num.partitions=4",
	"default.replication.factor=1",
	"min.insync.replicas=1",
	"auto.create.topics.enable=true",
	"offsets.topic.num.partitions=4",
	"offsets.topic.replication.factor=1",
	"transaction.state.log.num.partitions=4",
	"transaction.state.log.replication.factor=1",
	"transaction.state.log.min.isr=1",
	"share.coordinator.state.topic.replication.factor=1",
	"share.coordinator.state.topic.min.isr=1",
	"group.initial.rebalance.delay.ms=0",
	"log.cleaner.dedupe.buffer.size=16777216",
}

// kafkaHeap is the JVM's heap, testenv's; the image's default is 1 GiB.
const kafkaHeap = "-Xmx512m -Xms64m"

func startKafka(ctx context.Context, image string, opts []testcontainers.ContainerCustomizer) (*testenv.Server, error) {
	port, err := testenv.RocketMQFreePorts(1) // ports below the ephemeral range: see its doc
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	env := map[string]string{"KAFKA_HEAP_OPTS": kafkaHeap}
	for _, s := range append(slices.Clone(kafkaSettings),
		"listeners=PLAINTEXT://0.0.0.0:"+strconv.Itoa(port)+",CONTROLLER://0.0.0.0:9093",
		"advertised.listeners=PLAINTEXT://"+addr) {
		name, value, _ := strings.Cut(s, "=")
		env[kafkaEnv(name)] = value
	}
	published := nat.Port(strconv.Itoa(port) + "/tcp")
	ready := wait.ForNop(func(ctx context.Context, target wait.StrategyTarget) error {
		return poll(ctx, target, func() error {
			ids, err := testenv.KafkaLiveBrokers(ctx, addr)
			if err != nil {
				return err
			}
			if !slices.Contains(ids, 1) {
				return fmt.Errorf("node 1 not among the live brokers %v", ids)
			}
			return nil
		})
	})
	c, err := testcontainers.Run(ctx, image, append(opts,
		testcontainers.WithEnv(env),
		testcontainers.WithExposedPorts(string(published)),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.PortBindings = nat.PortMap{published: {{HostIP: "127.0.0.1", HostPort: published.Port()}}}
		}),
		testcontainers.WithWaitStrategyAndDeadline(startTimeout, ready))...)
	if err != nil {
		return nil, errors.Join(err, terminate(c)())
	}
	version, err := kafkaVersion(ctx, c)
	if err != nil {
		return nil, errors.Join(err, terminate(c)())
	}
	return testenv.NewServer("kafka", addr, "Apache Kafka "+version,
		map[string]string{"IDEMQ_KAFKA_BROKERS": addr}, 0, terminate(c)), nil
}

// kafkaEnv is the variable apache/kafka's image turns into the property
// name (kafka.docker.KafkaDockerWrapper: "_" for ".", "__" for "_", "___"
// for "-").
func kafkaEnv(property string) string {
	return "KAFKA_" + strings.NewReplacer("-", "___", "_", "__", ".", "_").Replace(strings.ToUpper(property))
}

// kafkaJar finds the release in the name of the server's jar,
// kafka_2.13-4.4.0.jar (not in a test or sources jar's).
var kafkaJar = regexp.MustCompile(`/kafka_[0-9.]+-([0-9][0-9A-Za-z.]*)\.jar`)

// kafkaVersion is the release of the server in c, read from its jar's
// name: the Kafka protocol does not tell it.
func kafkaVersion(ctx context.Context, c testcontainers.Container) (string, error) {
	code, r, err := c.Exec(ctx, []string{"sh", "-c", "echo /opt/kafka/libs/kafka_*.jar"}, exec.Multiplexed())
	if err != nil {
		return "", fmt.Errorf("kafka version: %w", err)
	}
	var out strings.Builder
	if _, err := io.Copy(&out, r); err != nil {
		return "", fmt.Errorf("kafka version: %w", err)
	}
	m := kafkaJar.FindStringSubmatch(out.String())
	if code != 0 || m == nil {
		return "", fmt.Errorf("kafka version: no server jar in /opt/kafka/libs (exit %d): %q", code, out.String())
	}
	return m[1], nil
}
