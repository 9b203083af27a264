package testenv

import (
	"context"
	_ "embed" // the pom and logback config below
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
	"testing"
)

// rocketmqVersion is the Apache RocketMQ release StartRocketMQ runs. 4.9.7 is
// the newest 4.x on Maven Central (4.9.8 was never published there) and, unlike
// 5.x, needs no gRPC, OpenTelemetry or RocksDB jars.
const rocketmqVersion = "4.9.7"

const (
	// rocketmqBrokerName names the one broker; it is also a topic the broker
	// registers, so tests must not use it as a topic name.
	rocketmqBrokerName = "idemq-testenv-broker"
	// rocketmqClusterName names the cluster of every broker testenv starts.
	rocketmqClusterName = "idemq-testenv"
)

// rocketmqLogback replaces the distribution's conf/ directory, without
// which 4.x's NamesrvStartup and BrokerStartup exit.
//
//go:embed rocketmq/logback.xml
var rocketmqLogback []byte

func init() {
	register(service{name: "rocketmq", env: "IDEMQ_ROCKETMQ_NAMESRV", local: startRocketMQService})
}

// RocketMQ returns the host:port of a real RocketMQ name server with a broker
// registered. The one StartRocketMQ runs creates topics on first send; a
// push consumer needs its topic to exist first (see [RocketMQTopic]).
func RocketMQ(tb testing.TB) string {
	tb.Helper()
	return lookup(tb, services["rocketmq"])
}

// RocketMQTopic creates topic with queues queues on every broker of the
// name server [RocketMQ] returns and waits for its route; it fails tb on
// error.
//
// Create a consumer group's retry topic, "%RETRY%"+group with 1 queue, the
// same way before the group's first consumer starts: the broker creates it
// only on the consumer's first heartbeat, after the consumer has looked up
// its routes, so the consumer sees it only at its 30 s route refresh and a
// first redelivery then takes about 40 s instead of 1 s.
func RocketMQTopic(tb testing.TB, topic string, queues int) {
	tb.Helper()
	if err := CreateRocketMQTopic(tb.Context(), RocketMQ(tb), topic, queues); err != nil {
		tb.Fatal(err)
	}
}

func startRocketMQService(ctx context.Context, dir string, log io.Writer) (*Server, error) {
	s, err := StartRocketMQ(ctx, dir, log)
	if err != nil {
		return nil, err
	}
	return &Server{Name: "rocketmq", Addr: s.NameServer(), Version: s.Version(), stop: s.Stop}, nil
}

// RocketMQServer is an Apache RocketMQ name server and one master broker
// running as two local JVMs, started by [StartRocketMQ]. Its methods are safe
// for concurrent use.
type RocketMQServer struct {
	nameServer string
	brokerAddr string
	version    string
	dir        string

	namesrv *process
	broker  *process

	stopOnce sync.Once
	stopErr  error
}

// StartRocketMQ starts a RocketMQ name server and broker on free ports, with
// their configuration, store and logs under dir, and returns once the broker
// is registered with the name server and serves requests. Clients reach both
// on 127.0.0.1, but RocketMQ 4.9.7 listens on every interface.
//
// It needs java on PATH and, the first time on a machine, mvn to resolve the
// jars from Maven Central into $IDEMQ_CACHE_DIR/rocketmq-4.9.7 (default
// directory: idemq under the user cache directory); a missing tool gives an
// error that wraps [exec.ErrNotFound]. ctx bounds start-up only, not the
// servers' lifetime.
//
// The JVMs' standard output and error, where RocketMQ prints its start-up
// banner and errors, go to dir/namesrv.out and dir/broker.out and to log if
// it is not nil; log must accept writes until Stop returns. RocketMQ's full
// logs are dir/namesrv.log and dir/broker.log.
//
// The caller must call Stop. Should the process die first (a test panic, go
// test -timeout), the kernel kills both JVMs (Linux's parent-death signal).
func StartRocketMQ(ctx context.Context, dir string, log io.Writer) (*RocketMQServer, error) {
	if log == nil {
		log = io.Discard
	}
	log = &rocketmqLockedWriter{w: log}
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("testenv: rocketmq: %w", err)
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("testenv: rocketmq: %w", err)
	}
	lib, err := rocketmqInstall(ctx, rocketmqVersion, false)
	if err != nil {
		return nil, err
	}
	version, err := rocketmqJarVersion(lib)
	if err != nil {
		return nil, err
	}
	// The broker's port-2, the name server's port, the broker's, its port+1.
	base, err := rocketmqFreePorts(4)
	if err != nil {
		return nil, err
	}
	nsPort, brokerPort := base+1, base+2
	s := &RocketMQServer{
		nameServer: net.JoinHostPort("127.0.0.1", strconv.Itoa(nsPort)),
		brokerAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(brokerPort)),
		version:    version,
		dir:        dir,
	}
	if err := s.writeConfig(nsPort, brokerPort); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, rocketmqStartTimeout)
	defer cancel()
	if err := s.start(ctx, java, lib, log); err != nil {
		// The start error already says what went wrong; Stop only cleans up.
		_ = s.Stop()
		return nil, fmt.Errorf("testenv: rocketmq: %w%s", err, s.tails())
	}
	return s, nil
}

// start runs the name server, waits until it accepts connections, then runs
// the broker and waits for its registration. Starting the two at once would
// save about a second, but a broker that finds no name server registers again
// only 10 s later.
func (s *RocketMQServer) start(ctx context.Context, java, lib string, log io.Writer) error {
	var err error
	s.namesrv, err = rocketmqStartNamesrv(ctx, java, lib, s.dir, s.nameServer, log)
	if err != nil {
		return err
	}
	s.broker, err = rocketmqStartProcess(java, s.dir, "broker", log,
		slices.Concat(rocketmqBrokerJVMFlags, rocketmqJVMFlags(s.dir, lib),
			[]string{"org.apache.rocketmq.broker.BrokerStartup", "-c", filepath.Join(s.dir, "broker.conf")}))
	if err != nil {
		return err
	}
	if err := rocketmqWaitRegistered(ctx, []*process{s.namesrv, s.broker}, s.nameServer, s.brokerAddr); err != nil {
		return fmt.Errorf("broker not registered: %w", err)
	}
	return nil
}

// writeConfig writes the logback files RocketMQ 4.x insists on and the name
// server and broker configuration.
func (s *RocketMQServer) writeConfig(nsPort, brokerPort int) error {
	conf := filepath.Join(s.dir, "home", "conf")
	if err := os.MkdirAll(conf, 0o755); err != nil {
		return fmt.Errorf("testenv: rocketmq: %w", err)
	}
	broker := strings.Join(rocketmqBrokerConfig(rocketmqClusterName, rocketmqBrokerName, s.nameServer, brokerPort,
		filepath.Join(s.dir, "store")), "\n") + "\n"
	files := []struct {
		name string
		data []byte
	}{
		{filepath.Join(conf, "logback_namesrv.xml"), rocketmqLogback},
		{filepath.Join(conf, "logback_broker.xml"), rocketmqLogback},
		{filepath.Join(s.dir, "namesrv.conf"), []byte("listenPort=" + strconv.Itoa(nsPort) + "\n")},
		{filepath.Join(s.dir, "broker.conf"), []byte(broker)},
	}
	for _, f := range files {
		if err := os.WriteFile(f.name, f.data, 0o644); err != nil {
			return fmt.Errorf("testenv: rocketmq: %w", err)
		}
	}
	return nil
}

// NameServer returns the name server address, "127.0.0.1:port".
func (s *RocketMQServer) NameServer() string { return s.nameServer }

// BrokerAddr returns the broker address, "127.0.0.1:port".
func (s *RocketMQServer) BrokerAddr() string { return s.brokerAddr }

// Version returns the RocketMQ release running, such as "4.9.7", as named by
// the broker jar.
func (s *RocketMQServer) Version() string { return s.version }

// CreateTopic is [CreateRocketMQTopic] on this server's name server.
func (s *RocketMQServer) CreateTopic(ctx context.Context, topic string, queues int) error {
	return CreateRocketMQTopic(ctx, s.nameServer, topic, queues)
}

// Stop kills the broker and the name server and waits for them to exit. It
// reports a JVM that had already exited on its own. Calls after the first
// return the first call's result.
func (s *RocketMQServer) Stop() error {
	s.stopOnce.Do(func() { s.stopErr = rocketmqStopAll(s.broker, s.namesrv) })
	return s.stopErr
}

// tails returns the last lines of every output and log file, for errors.
// The .out files hold little but errors; a start-up exception comes before
// the shutdown hook's own stack trace.
func (s *RocketMQServer) tails() string {
	return rocketmqTails(s.dir, []string{"namesrv.out", "broker.out"}, 40) +
		rocketmqTails(s.dir, []string{"namesrv.log", "broker.log"}, 10)
}
