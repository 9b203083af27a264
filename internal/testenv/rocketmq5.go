package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// rocketmq5Version is the Apache RocketMQ 5.x release StartRocketMQ5 runs.
// Maven Central has rocketmq-namesrv, rocketmq-broker and rocketmq-proxy at
// 5.5.0 (and 5.3.3; there is no proxy 5.5.1). Its jars are 150 files, 102 MB.
const rocketmq5Version = "5.5.0"

// rocketmq5BrokerName names the broker inside the proxy; like every broker
// name it is also a topic, so tests must not use it as a topic name.
const rocketmq5BrokerName = "idemq-testenv-broker5"

func init() {
	register(service{
		name:  "rocketmq5",
		env:   "IDEMQ_ROCKETMQ5_NAMESRV",
		also:  []string{"IDEMQ_ROCKETMQ5_PROXY"},
		local: startRocketMQ5Service,
	})
}

// RocketMQ5Endpoints are the addresses of a RocketMQ 5.x server,
// "127.0.0.1:port" each.
type RocketMQ5Endpoints struct {
	// NameServer is the name server, for the remoting clients
	// (rocketmq-client-go/v2) and for CreateRocketMQTopic and
	// CreateRocketMQGroup.
	NameServer string
	// Proxy is the proxy's gRPC endpoint, for the gRPC clients
	// (github.com/apache/rocketmq-clients/golang/v5), without TLS.
	Proxy string
}

// RocketMQ5 returns the endpoints of a real RocketMQ 5.x server: the ones
// IDEMQ_ROCKETMQ5_NAMESRV and IDEMQ_ROCKETMQ5_PROXY name (both or neither
// must be set), or those of the server [StartRocketMQ5] starts on first use.
func RocketMQ5(tb testing.TB) RocketMQ5Endpoints {
	tb.Helper()
	env := lookupEnv(tb, services["rocketmq5"])
	return RocketMQ5Endpoints{NameServer: env["IDEMQ_ROCKETMQ5_NAMESRV"], Proxy: env["IDEMQ_ROCKETMQ5_PROXY"]}
}

// RocketMQ5Topic creates topic with queues queues on every broker of the
// name server [RocketMQ5] returns and waits for its route; it fails tb on
// error. The topic takes every message type (see [StartRocketMQ5]).
func RocketMQ5Topic(tb testing.TB, topic string, queues int) {
	tb.Helper()
	if err := CreateRocketMQTopic(tb.Context(), RocketMQ5(tb).NameServer, topic, queues); err != nil {
		tb.Fatal(err)
	}
}

// RocketMQGroup is [CreateRocketMQGroup]; it fails tb on error.
func RocketMQGroup(tb testing.TB, nameServer, group string, retryMaxTimes int) {
	tb.Helper()
	if err := CreateRocketMQGroup(tb.Context(), nameServer, group, retryMaxTimes); err != nil {
		tb.Fatal(err)
	}
}

func startRocketMQ5Service(ctx context.Context, dir string, log io.Writer) (*Server, error) {
	s, err := StartRocketMQ5(ctx, dir, log)
	if err != nil {
		return nil, err
	}
	return &Server{
		Name:    "rocketmq5",
		Addr:    s.Proxy(),
		Version: s.Version(),
		Env: map[string]string{
			"IDEMQ_ROCKETMQ5_NAMESRV": s.NameServer(),
			"IDEMQ_ROCKETMQ5_PROXY":   s.Proxy(),
		},
		stop: s.Stop,
	}, nil
}

// RocketMQ5Server is an Apache RocketMQ 5.x name server and a proxy in Local
// mode, the broker running inside the proxy's JVM: two local JVMs, started
// by [StartRocketMQ5]. Its methods are safe for concurrent use.
type RocketMQ5Server struct {
	nameServer string
	brokerAddr string
	proxy      string
	version    string
	dir        string

	namesrv *process
	proxyP  *process

	stopOnce sync.Once
	stopErr  error
}

// StartRocketMQ5 starts a RocketMQ 5.x name server and a proxy in Local mode
// (org.apache.rocketmq.proxy.ProxyStartup -pm local, which starts a broker
// in its own JVM) on free ports, with their configuration, store and logs
// under dir, and returns once the broker is registered with the name server
// and the proxy accepts gRPC connections. It is [StartRocketMQ]'s 5.x
// counterpart: same jar cache ($IDEMQ_CACHE_DIR/rocketmq-5.5.0), same
// broker settings, same error tails, same parent-death kill. The JVMs'
// output goes to dir/namesrv.out and dir/proxy.out and to log; RocketMQ 5.x
// writes its logs under dir/logs/rocketmqlogs (broker.log, proxy.log,
// namesrv.log, ...) from the logback files in its jars.
//
// Remoting clients (rocketmq-client-go/v2, and CreateRocketMQTopic) use the
// name server as with 4.x; gRPC clients use the proxy. Every topic takes
// NORMAL, DELAY, TRANSACTION and FIFO messages from gRPC clients: the proxy
// runs with enableTopicMessageTypeCheck=false. With the check (the default),
// a gRPC send is refused unless the message's type equals the topic's
// "message.type" attribute, which is NORMAL for a topic created without it
// (CreateRocketMQTopic, or auto-creation on a remoting send); tests would
// then need a topic per message type, and a topic created for one kind of
// test could not be reused by another. The cost: a test here cannot see the
// "TopicMessageType validate failed" refusal a production 5.x proxy gives a
// transactional send to a NORMAL topic. The broker also has
// enableMixedMessageType=true, so a test may still create a topic with
// "+message.type=MIXED".
//
// What start-up looks like (5.5.0, JDK 17, two cores): the name server
// accepts connections after about 2.5 s; the proxy JVM starts the broker
// (which registers with the name server) and then its gRPC server, ready
// about 9 s after the proxy JVM's start on an idle machine, 13-30 s when
// other JVMs start beside it. The proxy's JVM listens on the broker's
// port, its port-2 and port+1 (as a 4.x broker does) and on the proxy's
// gRPC and remoting ports; the broker keeps part of its store in RocksDB
// (dir/store/rocksdbstore). Resident memory: name server about 170 MB,
// proxy with broker about 350 MB after start and near 700 MB after minutes
// of gRPC tests (heap capped at 512 MB). The first start on a machine also
// resolves the jars (150 files, 102 MB): 14 s from Maven Central into an
// empty local repository.
//
// The caller must call Stop.
func StartRocketMQ5(ctx context.Context, dir string, log io.Writer) (*RocketMQ5Server, error) {
	java, dir, lib, version, log, err := rocketmqPrepare(ctx, "rocketmq5", rocketmq5Version, true, dir, log)
	if err != nil {
		return nil, err
	}
	// The broker's port-2, the name server's, the broker's, its port+1,
	// the proxy's gRPC port and its remoting port.
	base, err := RocketMQFreePorts(6)
	if err != nil {
		return nil, err
	}
	s := &RocketMQ5Server{
		nameServer: hostPort(base + 1),
		brokerAddr: hostPort(base + 2),
		proxy:      hostPort(base + 4),
		version:    version,
		dir:        dir,
	}
	if err := s.writeConfig(base+1, base+2, base+4, base+5); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, rocketmqStartTimeout)
	defer cancel()
	if err := s.start(ctx, java, lib, log); err != nil {
		_ = s.Stop()
		return nil, fmt.Errorf("testenv: rocketmq5: %w%s", err, s.tails())
	}
	return s, nil
}

// start runs the name server, waits until it accepts connections, then runs
// the proxy and waits for the broker's registration and the gRPC port. The
// proxy starts the broker first and its gRPC server last.
func (s *RocketMQ5Server) start(ctx context.Context, java, lib string, log io.Writer) error {
	var err error
	s.namesrv, err = rocketmqStartNamesrv(ctx, java, lib, s.dir, s.nameServer, log)
	if err != nil {
		return err
	}
	s.proxyP, err = rocketmqStartProcess(java, s.dir, "proxy", log,
		slices.Concat(rocketmqBrokerJVMFlags, rocketmqJVMFlags(s.dir, lib),
			[]string{"org.apache.rocketmq.proxy.ProxyStartup", "-pm", "local",
				"-bc", filepath.Join(s.dir, "broker.conf"), "-pc", filepath.Join(s.dir, "proxy.json")}))
	if err != nil {
		return err
	}
	procs := []*process{s.namesrv, s.proxyP}
	if err := rocketmqWaitRegistered(ctx, procs, s.nameServer, s.brokerAddr); err != nil {
		return fmt.Errorf("broker not registered: %w", err)
	}
	var d net.Dialer
	if err := rocketmqPoll(ctx, procs, func() error {
		conn, err := d.DialContext(ctx, "tcp", s.proxy)
		if err != nil {
			return err
		}
		return conn.Close()
	}); err != nil {
		return fmt.Errorf("proxy not ready: %w", err)
	}
	return nil
}

// writeConfig writes the name server, broker and proxy configuration.
func (s *RocketMQ5Server) writeConfig(nsPort, brokerPort, grpcPort, remotingPort int) error {
	if err := os.MkdirAll(filepath.Join(s.dir, "home", "conf"), 0o755); err != nil {
		return fmt.Errorf("testenv: rocketmq5: %w", err)
	}
	broker, proxy, err := RocketMQ5Config(rocketmqClusterName, rocketmq5BrokerName, s.nameServer, brokerPort, grpcPort, remotingPort,
		filepath.Join(s.dir, "store"))
	if err != nil {
		return err
	}
	files := []struct {
		name string
		data []byte
	}{
		{filepath.Join(s.dir, "namesrv.conf"), []byte("listenPort=" + strconv.Itoa(nsPort) + "\n")},
		{filepath.Join(s.dir, "broker.conf"), broker},
		{filepath.Join(s.dir, "proxy.json"), proxy},
	}
	for _, f := range files {
		if err := os.WriteFile(f.name, f.data, 0o644); err != nil {
			return fmt.Errorf("testenv: rocketmq5: %w", err)
		}
	}
	return nil
}

// RocketMQ5Config returns the broker configuration (a properties file) and
// the proxy's (JSON) of a RocketMQ 5.x proxy in Local mode, as
// [StartRocketMQ5] runs it: broker name in cluster, registered with
// nameServer at 127.0.0.1:brokerPort, its store under store, the proxy's
// gRPC server on grpcPort and its remoting server on remotingPort. The
// proxy's JSON is read into ProxyConfig by fastjson, which ignores unknown
// fields as the broker ignores unknown keys: each one here is a field of
// 5.x's ProxyConfig.
func RocketMQ5Config(cluster, name, nameServer string, brokerPort, grpcPort, remotingPort int, store string) (broker, proxy []byte, err error) {
	lines := append(RocketMQBrokerConfig(cluster, name, nameServer, brokerPort, store),
		// Allows topics with the attribute message.type=MIXED.
		"enableMixedMessageType=true",
	)
	proxy, err = json.MarshalIndent(map[string]any{
		"rocketMQClusterName": cluster,
		"namesrvAddr":         nameServer,
		"grpcServerPort":      grpcPort,
		// The proxy also serves remoting clients here (defaults 8081 and
		// 8080); tests use the broker's own port, through the name server.
		"remotingListenPort": remotingPort,
		// See StartRocketMQ5.
		"enableTopicMessageTypeCheck": false,
	}, "", "  ")
	if err != nil {
		return nil, nil, fmt.Errorf("testenv: rocketmq5: %w", err)
	}
	return []byte(strings.Join(lines, "\n") + "\n"), append(proxy, '\n'), nil
}

// NameServer returns the name server address, "127.0.0.1:port".
func (s *RocketMQ5Server) NameServer() string { return s.nameServer }

// BrokerAddr returns the address of the broker inside the proxy,
// "127.0.0.1:port", where remoting clients send and pull.
func (s *RocketMQ5Server) BrokerAddr() string { return s.brokerAddr }

// Proxy returns the proxy's gRPC endpoint, "127.0.0.1:port".
func (s *RocketMQ5Server) Proxy() string { return s.proxy }

// Endpoints returns the name server and proxy addresses.
func (s *RocketMQ5Server) Endpoints() RocketMQ5Endpoints {
	return RocketMQ5Endpoints{NameServer: s.nameServer, Proxy: s.proxy}
}

// Version returns the RocketMQ release running, such as "5.5.0", as named by
// the broker jar.
func (s *RocketMQ5Server) Version() string { return s.version }

// CreateTopic is [CreateRocketMQTopic] on this server's name server.
func (s *RocketMQ5Server) CreateTopic(ctx context.Context, topic string, queues int) error {
	return CreateRocketMQTopic(ctx, s.nameServer, topic, queues)
}

// Stop kills the proxy and the name server and waits for them to exit. It
// reports a JVM that had already exited on its own. Calls after the first
// return the first call's result.
func (s *RocketMQ5Server) Stop() error {
	s.stopOnce.Do(func() { s.stopErr = rocketmqStopAll(s.proxyP, s.namesrv) })
	return s.stopErr
}

// tails returns the last lines of the output and log files, for errors.
func (s *RocketMQ5Server) tails() string {
	logs := filepath.Join("logs", "rocketmqlogs")
	return rocketmqTails(s.dir, []string{"namesrv.out", "proxy.out"}, 40) +
		rocketmqTails(s.dir, []string{filepath.Join(logs, "namesrv.log"), filepath.Join(logs, "broker.log"), filepath.Join(logs, "proxy.log")}, 10)
}
