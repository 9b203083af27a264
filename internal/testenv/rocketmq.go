package testenv

import (
	"context"
	_ "embed" // the logback config below
	"fmt"
	"io"
	"os"
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
	// rocketmqBrokerName names the first broker (the others add "-1",
	// "-2", ...); a broker name is also a topic the broker registers, so
	// tests must not use it as a topic name.
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

// RocketMQConfig says what [StartRocketMQCluster] starts. The zero value
// is what [StartRocketMQ] starts: a name server and one master broker.
type RocketMQConfig struct {
	// Brokers is the number of master brokers (default 1), each its own
	// JVM with its own store, all in one cluster under different broker
	// names: a topic created with CreateRocketMQTopic has its queues on
	// each, and a producer sends to all of them in turn.
	Brokers int
}

func (c *RocketMQConfig) setDefaults() {
	if c.Brokers == 0 {
		c.Brokers = 1
	}
}

// Validate reports a configuration StartRocketMQCluster cannot start.
func (c RocketMQConfig) Validate() error {
	if c.Brokers < 0 || c.Brokers > 8 {
		return fmt.Errorf("testenv: rocketmq: %d brokers, want 1 to 8", c.Brokers)
	}
	return nil
}

// RocketMQServer is an Apache RocketMQ name server and its master brokers
// running as local JVMs, started by [StartRocketMQ] or
// [StartRocketMQCluster]. Its methods are safe for concurrent use.
type RocketMQServer struct {
	nameServer string
	version    string
	dir        string
	java, lib  string
	log        io.Writer // for restarted brokers

	namesrv *process
	brokers []*rocketmqBroker

	mu sync.Mutex // guards each broker's proc

	stopOnce sync.Once
	stopErr  error
}

// rocketmqBroker is one master broker of a RocketMQServer.
type rocketmqBroker struct {
	name string // brokerName
	port int
	// stem names its files under the server's dir: stem.conf, stem.out
	// (standard output and error), stem.log (RocketMQ's log); store is
	// its store's directory there.
	stem, store string
	proc        *process // nil while killed
}

// addr is b's address, "127.0.0.1:port".
func (b *rocketmqBroker) addr() string { return hostPort(b.port) }

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
	return StartRocketMQCluster(ctx, dir, log, RocketMQConfig{})
}

// StartRocketMQCluster is [StartRocketMQ] with the brokers cfg asks for. The
// first broker's files are named as StartRocketMQ names them (broker.conf,
// broker.out, broker.log, store/); broker i > 0 has brokerI.conf,
// brokerI.out, brokerI.log and storeI/. The brokers start together once the
// name server is up, and it returns once all of them are registered.
//
// A test can kill a broker with [RocketMQServer.KillBroker] and start it
// again on the same store with [RocketMQServer.RestartBroker].
func StartRocketMQCluster(ctx context.Context, dir string, log io.Writer, cfg RocketMQConfig) (*RocketMQServer, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	java, dir, lib, version, log, err := rocketmqPrepare(ctx, "rocketmq", rocketmqVersion, false, dir, log)
	if err != nil {
		return nil, err
	}
	// Four ports per broker: its port-2, a spare (the first broker's is the
	// name server's), its port, its port+1.
	base, err := RocketMQFreePorts(4 * cfg.Brokers)
	if err != nil {
		return nil, err
	}
	s := &RocketMQServer{
		nameServer: hostPort(base + 1),
		version:    version,
		dir:        dir,
		java:       java,
		lib:        lib,
		log:        log,
	}
	for i := range cfg.Brokers {
		b := &rocketmqBroker{name: rocketmqBrokerName, port: base + 4*i + 2, stem: "broker", store: "store"}
		if i > 0 {
			b.name = fmt.Sprintf("%s-%d", rocketmqBrokerName, i)
			b.stem = fmt.Sprintf("broker%d", i)
			b.store = fmt.Sprintf("store%d", i)
		}
		s.brokers = append(s.brokers, b)
	}
	if err := s.writeConfig(base + 1); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, rocketmqStartTimeout)
	defer cancel()
	if err := s.start(ctx); err != nil {
		// The start error already says what went wrong; Stop only cleans up.
		_ = s.Stop()
		return nil, fmt.Errorf("testenv: rocketmq: %w%s", err, s.tails())
	}
	return s, nil
}

// start runs the name server, waits until it accepts connections, then runs
// the brokers and waits for their registration. Starting them all at once
// would save about a second, but a broker that finds no name server
// registers again only 10 s later.
func (s *RocketMQServer) start(ctx context.Context) error {
	var err error
	s.namesrv, err = rocketmqStartNamesrv(ctx, s.java, s.lib, s.dir, s.nameServer, s.log)
	if err != nil {
		return err
	}
	for _, b := range s.brokers {
		if b.proc, err = s.startBroker(b); err != nil {
			return err
		}
	}
	for _, b := range s.brokers {
		if err := rocketmqWaitRegistered(ctx, []*process{s.namesrv, b.proc}, s.nameServer, b.addr()); err != nil {
			return fmt.Errorf("%s not registered: %w", b.stem, err)
		}
	}
	return nil
}

// startBroker runs b's JVM.
func (s *RocketMQServer) startBroker(b *rocketmqBroker) (*process, error) {
	return rocketmqStartProcess(s.java, s.dir, b.stem, s.log,
		slices.Concat(rocketmqBrokerJVMFlags, rocketmqJVMFlags(s.dir, s.lib),
			[]string{"org.apache.rocketmq.broker.BrokerStartup", "-c", filepath.Join(s.dir, b.stem+".conf")}))
}

// writeConfig writes the logback files RocketMQ 4.x insists on and the name
// server and broker configuration.
func (s *RocketMQServer) writeConfig(nsPort int) error {
	conf := filepath.Join(s.dir, "home", "conf")
	if err := os.MkdirAll(conf, 0o755); err != nil {
		return fmt.Errorf("testenv: rocketmq: %w", err)
	}
	type file struct {
		name string
		data []byte
	}
	files := []file{
		{filepath.Join(conf, "logback_namesrv.xml"), rocketmqLogback},
		{filepath.Join(conf, "logback_broker.xml"), rocketmqLogback},
		{filepath.Join(s.dir, "namesrv.conf"), []byte("listenPort=" + strconv.Itoa(nsPort) + "\n")},
	}
	for _, b := range s.brokers {
		conf := RocketMQBrokerConfig(rocketmqClusterName, b.name, s.nameServer, b.port, filepath.Join(s.dir, b.store))
		files = append(files, file{filepath.Join(s.dir, b.stem+".conf"), []byte(strings.Join(conf, "\n") + "\n")})
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

// BrokerAddr returns the (first) broker's address, "127.0.0.1:port".
func (s *RocketMQServer) BrokerAddr() string { return s.brokers[0].addr() }

// Brokers returns the brokers' addresses, "127.0.0.1:port" each, in the
// order KillBroker and RestartBroker number them. A broker keeps its
// address across restarts.
func (s *RocketMQServer) Brokers() []string {
	addrs := make([]string, len(s.brokers))
	for i, b := range s.brokers {
		addrs[i] = b.addr()
	}
	return addrs
}

// BrokerNames returns the brokers' names (their brokerName, which clients
// see in a message queue's BrokerName), in the order of Brokers.
func (s *RocketMQServer) BrokerNames() []string {
	names := make([]string, len(s.brokers))
	for i, b := range s.brokers {
		names[i] = b.name
	}
	return names
}

// KillBroker kills broker i's JVM with SIGKILL, as a crash or the OOM
// killer would, and waits for it to exit. What it wrote is in the page
// cache, so nothing the broker stored is lost (the broker flushes
// asynchronously; only a machine crash would lose the unflushed part). It
// fails if the broker had already exited on its own, or was killed before
// and not restarted.
//
// The name server drops the broker's routes at once, not after its 2 min
// broker timeout: the kernel closes the broker's connection to it, and the
// name server drops a broker whose channel closes. Clients keep their cached
// routes until their next refresh (rocketmq-client-go: every 30 s).
func (s *RocketMQServer) KillBroker(i int) error {
	if i < 0 || i >= len(s.brokers) {
		return fmt.Errorf("testenv: rocketmq: kill broker %d of %d", i, len(s.brokers))
	}
	b := s.brokers[i]
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.proc == nil {
		return fmt.Errorf("testenv: rocketmq: kill %s: not running (killed before)", b.stem)
	}
	// stop reports a broker that had died on its own; a live one it kills
	// with SIGKILL, the signal of every RocketMQ process here.
	err := b.proc.stop()
	b.proc = nil
	if err != nil {
		return fmt.Errorf("testenv: rocketmq: kill %s: %w", b.stem, err)
	}
	return nil
}

// RestartBroker starts broker i again, on its store, address and
// configuration, after KillBroker, and returns once it is registered with
// the name server again. A broker killed with SIGKILL finds its abort file
// and recovers its store abnormally: it rebuilds its consume queues from the
// commit log, so every message it had stored is consumable again. ctx
// bounds the start.
func (s *RocketMQServer) RestartBroker(ctx context.Context, i int) error {
	if i < 0 || i >= len(s.brokers) {
		return fmt.Errorf("testenv: rocketmq: restart broker %d of %d", i, len(s.brokers))
	}
	b := s.brokers[i]
	s.mu.Lock()
	if b.proc != nil {
		s.mu.Unlock()
		return fmt.Errorf("testenv: rocketmq: restart %s: still running", b.stem)
	}
	p, err := s.startBroker(b)
	if err != nil {
		s.mu.Unlock()
		return fmt.Errorf("testenv: rocketmq: restart %w", err)
	}
	b.proc = p
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, rocketmqStartTimeout)
	defer cancel()
	if err := rocketmqWaitRegistered(ctx, []*process{s.namesrv, p}, s.nameServer, b.addr()); err != nil {
		return fmt.Errorf("testenv: rocketmq: restart %s: not registered: %w%s", b.stem, err,
			rocketmqTails(s.dir, []string{b.stem + ".out"}, 40)+rocketmqTails(s.dir, []string{b.stem + ".log"}, 10))
	}
	return nil
}

// Version returns the RocketMQ release running, such as "4.9.7", as named by
// the broker jar.
func (s *RocketMQServer) Version() string { return s.version }

// CreateTopic is [CreateRocketMQTopic] on this server's name server.
func (s *RocketMQServer) CreateTopic(ctx context.Context, topic string, queues int) error {
	return CreateRocketMQTopic(ctx, s.nameServer, topic, queues)
}

// Stop kills the brokers and the name server and waits for them to exit. It
// reports a JVM that had exited on its own (not one KillBroker killed).
// Calls after the first return the first call's result.
func (s *RocketMQServer) Stop() error {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		var procs []*process
		for _, b := range s.brokers {
			procs = append(procs, b.proc)
			b.proc = nil
		}
		s.mu.Unlock()
		s.stopErr = rocketmqStopAll(append(procs, s.namesrv)...)
	})
	return s.stopErr
}

// tails returns the last lines of every output and log file, for errors.
// The .out files hold little but errors; a start-up exception comes before
// the shutdown hook's own stack trace.
func (s *RocketMQServer) tails() string {
	outs, logs := []string{"namesrv.out"}, []string{"namesrv.log"}
	for _, b := range s.brokers {
		outs, logs = append(outs, b.stem+".out"), append(logs, b.stem+".log")
	}
	return rocketmqTails(s.dir, outs, 40) + rocketmqTails(s.dir, logs, 10)
}
