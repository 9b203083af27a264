package testenv

import (
	"bufio"
	"context"
	"crypto/rand"
	_ "embed" // the pom below
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// kafkaRelease is the Apache Kafka release the tests run, in KRaft mode.
const kafkaRelease = "4.4.0"

// kafkaPOM resolves the server jars (see kafka/pom.xml).
//
//go:embed kafka/pom.xml
var kafkaPOM []byte

func init() {
	register(service{name: "kafka", env: "IDEMQ_KAFKA_BROKERS", local: startKafkaService})
}

// Kafka returns the bootstrap address ("host:port") of a real Apache Kafka
// 4.x server in KRaft mode, one node, that creates a topic of 4 partitions
// on first use.
func Kafka(tb testing.TB) string {
	tb.Helper()
	return lookup(tb, services["kafka"])
}

func startKafkaService(ctx context.Context, dir string, log io.Writer) (*Server, error) {
	k, err := NewPrivateKafka(ctx, dir, log, 1)
	if err != nil {
		return nil, err
	}
	return &Server{Name: "kafka", Addr: k.Bootstrap(), Version: "Apache Kafka " + kafkaRelease, stop: k.Stop}, nil
}

// PrivateKafka is an Apache Kafka cluster of a test's own, of local JVMs in
// KRaft mode: node 0 is broker and controller, the others brokers only. A
// topic created on first use has 4 partitions, each on every node (at
// most 3); so has the consumer offsets topic, so that a group's offsets
// survive the loss of any node but node 0. Its methods are safe for
// concurrent use.
type PrivateKafka struct {
	dir, java, lib, cluster string
	log                     io.Writer
	nodes                   []*kafkaNode

	mu       sync.Mutex
	stopOnce sync.Once
	stopErr  error
}

type kafkaNode struct {
	id               int
	port, controller int // controller: node 0's only
	dir              string
	proc             *process // nil while down
}

func (n *kafkaNode) addr() string { return hostPort(n.port) }

// StartPrivateKafka starts a PrivateKafka of nodes nodes that is stopped
// when tb ends. Missing java or mvn skips tb, or fails it under CI=true
// (see [Missing]).
func StartPrivateKafka(tb testing.TB, nodes int) *PrivateKafka {
	tb.Helper()
	dir, err := os.MkdirTemp("", "idemq-private-kafka-")
	if err != nil {
		tb.Fatal(err)
	}
	k, err := NewPrivateKafka(tb.Context(), dir, nil, nodes)
	if err != nil {
		os.RemoveAll(dir)
		if errors.Is(err, exec.ErrNotFound) {
			Missing(tb, err.Error())
		}
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := errors.Join(k.Stop(), os.RemoveAll(dir)); err != nil {
			tb.Errorf("testenv: %v", err)
		}
	})
	return k
}

// NewPrivateKafka starts a PrivateKafka of nodes nodes with its
// configuration, data and logs under dir, and returns once every node is
// registered and unfenced. It needs java on PATH and, the first time on a
// machine, mvn to resolve the jars from Maven Central into
// $IDEMQ_CACHE_DIR/kafka-4.4.0 (a missing tool gives an error that wraps
// [exec.ErrNotFound]). The JVMs' output goes to dir/nodeI/kafka.out and to
// log if it is not nil. The caller must call Stop; should the process die
// first, the kernel kills the JVMs (Linux's parent-death signal).
//
// What start-up looks like (4.4.0, JDK 17, two cores): formatting a node's
// storage takes about 0.7 s, a node serves 1.5-4.5 s after its JVM starts;
// a node killed with SIGKILL serves again about 4 s after its restart
// (broker.session.timeout.ms is 2 s here, so the controller fences a dead
// node quickly).
func NewPrivateKafka(ctx context.Context, dir string, log io.Writer, nodes int) (*PrivateKafka, error) {
	if nodes < 1 {
		return nil, fmt.Errorf("testenv: kafka: %d nodes, want at least 1", nodes)
	}
	if log == nil {
		log = io.Discard
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("testenv: kafka: %w", err)
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, fmt.Errorf("testenv: kafka: %w", err)
	}
	lib, err := KafkaInstall(ctx)
	if err != nil {
		return nil, err
	}
	k := &PrivateKafka{dir: dir, java: java, lib: lib, cluster: kafkaClusterID(), log: &rocketmqLockedWriter{w: log}}
	for i := range nodes {
		n := &kafkaNode{id: i, dir: filepath.Join(dir, "node"+strconv.Itoa(i))}
		if n.port, err = freePort(); err != nil {
			return nil, fmt.Errorf("testenv: kafka: %w", err)
		}
		if i == 0 {
			if n.controller, err = freePort(); err != nil {
				return nil, fmt.Errorf("testenv: kafka: %w", err)
			}
		}
		k.nodes = append(k.nodes, n)
	}
	ctx, cancel := context.WithTimeout(ctx, rocketmqStartTimeout)
	defer cancel()
	if err := k.start(ctx); err != nil {
		_ = k.Stop()
		return nil, fmt.Errorf("testenv: kafka: %w", err)
	}
	return k, nil
}

// KafkaInstall returns the directory holding the jars of the Apache Kafka
// release the tests run, resolving them with Maven on first use into
// $IDEMQ_CACHE_DIR/kafka-4.4.0/lib (see [installJars]); the container
// twin's stand-in image carries the same jars.
func KafkaInstall(ctx context.Context) (string, error) {
	return installJars(ctx, "kafka", "kafka-"+kafkaRelease, kafkaPOM, "-Dkafka.version="+kafkaRelease)
}

// kafkaClusterID is a fresh cluster id: a UUID in URL-safe base64 without
// padding, as kafka-storage random-uuid prints it, and like it never with
// a leading '-', which the storage tool's parser takes for an option (one
// id in 64 did, and the format failed).
func kafkaClusterID() string {
	for {
		var b [16]byte
		_, _ = rand.Read(b[:])
		if id := base64.RawURLEncoding.EncodeToString(b[:]); id[0] != '-' {
			return id
		}
	}
}

// start formats every node's storage, in parallel, then starts the nodes
// and waits until all of them are registered.
func (k *PrivateKafka) start(ctx context.Context) error {
	errs := make([]error, len(k.nodes))
	var wg sync.WaitGroup
	for i, n := range k.nodes {
		wg.Go(func() { errs[i] = k.format(ctx, n) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, n := range k.nodes {
		if err := k.launchLocked(n); err != nil {
			return err
		}
	}
	return k.waitRegistered(ctx, k.nodes...)
}

// format writes n's configuration and formats its storage.
func (k *PrivateKafka) format(ctx context.Context, n *kafkaNode) error {
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(n.dir, "server.properties"), []byte(strings.Join(k.config(n), "\n")+"\n"), 0o644); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, k.java, slices.Concat(k.jvmFlags(n, "-Xmx128m"),
		[]string{"kafka.tools.StorageTool", "format", "-c", filepath.Join(n.dir, "server.properties"), "-t", k.cluster})...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("node %d: format storage: %w\n%s", n.id, err, lastLines(string(out), 20))
	}
	return nil
}

// config is n's server.properties.
func (k *PrivateKafka) config(n *kafkaNode) []string {
	replicas := strconv.Itoa(min(len(k.nodes), 3))
	listeners := "PLAINTEXT://" + n.addr()
	roles := "broker"
	if n.id == 0 {
		listeners += ",CONTROLLER://" + hostPort(n.controller)
		roles = "broker,controller"
	}
	return []string{
		"process.roles=" + roles,
		"node.id=" + strconv.Itoa(n.id+1),
		"listeners=" + listeners,
		"advertised.listeners=PLAINTEXT://" + n.addr(),
		"controller.listener.names=CONTROLLER",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name=PLAINTEXT",
		"controller.quorum.voters=1@" + hostPort(k.nodes[0].controller),
		"log.dirs=" + filepath.Join(n.dir, "data"),
		"num.partitions=4",
		"default.replication.factor=" + replicas,
		"min.insync.replicas=1",
		"auto.create.topics.enable=true",
		// The internal topics: as many partitions as user topics have (50
		// by default, each loaded by the coordinator), on every node.
		"offsets.topic.num.partitions=4",
		"offsets.topic.replication.factor=" + replicas,
		"transaction.state.log.num.partitions=4",
		"transaction.state.log.replication.factor=" + replicas,
		"transaction.state.log.min.isr=1",
		"share.coordinator.state.topic.replication.factor=" + replicas,
		"share.coordinator.state.topic.min.isr=1",
		// A group's first member gets its partitions at once, not after
		// 3 s waiting for others.
		"group.initial.rebalance.delay.ms=0",
		// The log cleaner's buffer is 128 MiB by default, over the heap.
		"log.cleaner.dedupe.buffer.size=16777216",
		// A node killed with SIGKILL is fenced after 2 s, not 9.
		"broker.session.timeout.ms=2000",
		"broker.heartbeat.interval.ms=500",
	}
}

// jvmFlags are the flags of n's JVMs: logs at WARN to standard error,
// temporary files under n's directory.
func (k *PrivateKafka) jvmFlags(n *kafkaNode, heap ...string) []string {
	return slices.Concat(heap, []string{
		"-XX:+UseSerialGC",
		"-Djava.io.tmpdir=" + n.dir,
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-cp", filepath.Join(k.lib, "*"),
	})
}

// launchLocked starts n's JVM on its formatted storage.
func (k *PrivateKafka) launchLocked(n *kafkaNode) error {
	p, err := startProcess(k.log, filepath.Join(n.dir, "kafka.out"), nil, k.java,
		slices.Concat(k.jvmFlags(n, "-Xmx512m", "-Xms64m"), []string{"kafka.Kafka", filepath.Join(n.dir, "server.properties")})...)
	if err != nil {
		return fmt.Errorf("node %d: %w", n.id, err)
	}
	n.proc = p
	return nil
}

// waitRegistered waits until node 0 lists each of nodes among the live
// brokers, or one of them dies.
func (k *PrivateKafka) waitRegistered(ctx context.Context, nodes ...*kafkaNode) error {
	for _, n := range nodes {
		err := waitReady(ctx, n.proc, func(ctx context.Context) error {
			if err := k.nodes[0].proc.exited(); err != nil {
				return fmt.Errorf("node 0 %w", err)
			}
			ids, err := KafkaLiveBrokers(ctx, n.addr())
			if err != nil {
				return err
			}
			if !slices.Contains(ids, int32(n.id+1)) {
				return fmt.Errorf("node %d not among the live brokers %v", n.id, ids)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("node %d: %w", n.id, err)
		}
	}
	return nil
}

// Bootstrap is the nodes' addresses, comma-separated, as
// IDEMQ_KAFKA_BROKERS gives them.
func (k *PrivateKafka) Bootstrap() string { return strings.Join(k.Brokers(), ",") }

// Brokers are the nodes' addresses, "127.0.0.1:port", node 0 first; they
// stay the same across restarts.
func (k *PrivateKafka) Brokers() []string {
	out := make([]string, len(k.nodes))
	for i, n := range k.nodes {
		out[i] = n.addr()
	}
	return out
}

// Kill kills node i's JVM with SIGKILL and leaves it down until Start.
// Killing node 0 takes the controller down with it: the other nodes then
// serve what they lead, but nothing changes leader until it is back.
func (k *PrivateKafka) Kill(i int) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	n, err := k.node(i)
	if err != nil {
		return err
	}
	if n.proc == nil {
		return fmt.Errorf("testenv: kafka: kill node %d: not running", i)
	}
	n.proc.signal = syscall.SIGKILL
	err = n.proc.stop()
	n.proc = nil
	return err
}

// Start starts node i again, killed, on its data, and returns once it is
// registered and unfenced again.
func (k *PrivateKafka) Start(ctx context.Context, i int) error {
	k.mu.Lock()
	n, err := k.node(i)
	if err == nil && n.proc != nil {
		err = fmt.Errorf("testenv: kafka: start node %d: already running", i)
	}
	if err == nil {
		err = k.launchLocked(n)
	}
	k.mu.Unlock()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, rocketmqStartTimeout)
	defer cancel()
	if err := k.waitRegistered(ctx, n); err != nil {
		return fmt.Errorf("testenv: kafka: start again: %w", err)
	}
	return nil
}

func (k *PrivateKafka) node(i int) (*kafkaNode, error) {
	if i < 0 || i >= len(k.nodes) {
		return nil, fmt.Errorf("testenv: kafka: no node %d of %d", i, len(k.nodes))
	}
	return k.nodes[i], nil
}

// Stop stops every node, brokers only first. It is safe to call more than
// once; it does not remove the directory.
func (k *PrivateKafka) Stop() error {
	k.stopOnce.Do(func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		var errs []error
		for _, n := range slices.Backward(k.nodes) {
			if n.proc != nil {
				errs = append(errs, n.proc.stop())
				n.proc = nil
			}
		}
		k.stopErr = errors.Join(errs...)
	})
	return k.stopErr
}

// kafkaBrokerIDs asks the broker at addr for the cluster's live brokers
// with a Metadata request (version 4, the oldest Kafka 4 serves, for no
// topic) and returns their node ids. A node is listed once it is
// registered and unfenced: then it serves produce and fetch requests.
func KafkaLiveBrokers(ctx context.Context, addr string) ([]int32, error) {
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	const client = "idemq-testenv"
	req := binary.BigEndian.AppendUint16(nil, 3) // Metadata
	req = binary.BigEndian.AppendUint16(req, 4)  // version
	req = binary.BigEndian.AppendUint32(req, 1)  // correlation id
	req = binary.BigEndian.AppendUint16(req, uint16(len(client)))
	req = append(req, client...)
	req = binary.BigEndian.AppendUint32(req, 0) // no topic
	req = append(req, 0)                        // no auto-creation
	if _, err := conn.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(req))), req...)); err != nil {
		return nil, err
	}
	r := bufio.NewReader(conn)
	var head struct{ Size, Correlation, Throttle, Brokers int32 }
	if err := binary.Read(r, binary.BigEndian, &head); err != nil {
		return nil, fmt.Errorf("metadata answer: %w", err)
	}
	if head.Brokers < 0 || head.Brokers > 1000 {
		return nil, fmt.Errorf("metadata answer lists %d brokers", head.Brokers)
	}
	ids := make([]int32, head.Brokers)
	for i := range ids {
		var b struct {
			ID      int32
			HostLen int16
		}
		if err := binary.Read(r, binary.BigEndian, &b); err != nil {
			return nil, fmt.Errorf("metadata answer: %w", err)
		}
		// The host, the port, the rack (a nullable string).
		if _, err := r.Discard(int(b.HostLen) + 4); err != nil {
			return nil, fmt.Errorf("metadata answer: %w", err)
		}
		var rack int16
		if err := binary.Read(r, binary.BigEndian, &rack); err != nil {
			return nil, fmt.Errorf("metadata answer: %w", err)
		}
		if rack > 0 {
			if _, err := r.Discard(int(rack)); err != nil {
				return nil, fmt.Errorf("metadata answer: %w", err)
			}
		}
		ids[i] = b.ID
	}
	return ids, nil
}

// KafkaBrokerIDs returns the node ids of the live brokers the broker at
// addr knows; it fails tb if it cannot ask.
func KafkaBrokerIDs(tb testing.TB, addr string) []int32 {
	tb.Helper()
	ids, err := KafkaLiveBrokers(tb.Context(), addr)
	if err != nil {
		tb.Fatalf("testenv: kafka: live brokers at %s: %v", addr, err)
	}
	return ids
}
