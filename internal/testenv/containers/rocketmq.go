package containers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/go-connections/nat"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/idemq/idemq/internal/testenv"
)

// RocketMQ runs as apache/rocketmq's images run it: `sh mqnamesrv` and
// `sh mqbroker` in ROCKETMQ_HOME/bin, JAVA_OPT_EXT appended to the JVM's
// options, the store under the rocketmq account's home.
//
// A client reaches a broker at the address the broker registers with the
// name server, not at the one it was given. The broker registers
// 127.0.0.1 (brokerIP1) and a port that is free on the host, and listens on
// that same port inside its container, which is published under the same
// number: clients on the host reach it as they reach testenv's local
// brokers. The proxy's gRPC port is published the same way, since a 5.x
// proxy answers route queries with its own port. The broker reaches the
// name server at the name server container's address on the engine's
// network, the one thing that only containers see.
const (
	rocketmqHome    = "/home/rocketmq"
	rocketmqCluster = "idemq-containers"
	rocketmqBroker  = "idemq-containers-broker"
	// The official images size the heap from the container's memory;
	// JAVA_OPT_EXT comes last, so these win. -Xmn keeps the young
	// generation inside a small heap.
	rocketmqNamesrvJVM = "-Xms128m -Xmx128m -Xmn64m"
	rocketmqBrokerJVM  = "-Xms512m -Xmx512m -Xmn256m" +
		// The broker refuses writes above 90 % disk use by default.
		" -Drocketmq.broker.diskSpaceWarningLevelRatio=0.99 -Drocketmq.broker.diskSpaceCleanForciblyRatio=0.98"
)

func startRocketMQ(ctx context.Context, image string, opts []testcontainers.ContainerCustomizer) (*testenv.Server, error) {
	// A broker also listens on its port-2 and port+1: inside its
	// container, so only its port must be free on the host.
	base, err := testenv.RocketMQFreePorts(1)
	if err != nil {
		return nil, err
	}
	r, err := startNamesrv(ctx, image, opts)
	if err != nil {
		return nil, err
	}
	conf := strings.Join(testenv.RocketMQBrokerConfig(rocketmqCluster, rocketmqBroker, r.internal, base, rocketmqHome+"/store"), "\n") + "\n"
	r.broker, err = startBroker(ctx, image, opts, r, base, nil,
		[]string{"sh", "mqbroker", "-c", rocketmqHome + "/broker.conf"},
		testcontainers.ContainerFile{Reader: strings.NewReader(conf), ContainerFilePath: rocketmqHome + "/broker.conf", FileMode: 0o644})
	if err != nil {
		return nil, errors.Join(err, r.stop())
	}
	version, err := testenv.RocketMQBrokerVersion(ctx, r.nameServer)
	if err != nil {
		return nil, errors.Join(err, r.stop())
	}
	return testenv.NewServer("rocketmq", r.nameServer, release(version),
		map[string]string{"IDEMQ_ROCKETMQ_NAMESRV": r.nameServer}, 0, r.stop), nil
}

func startRocketMQ5(ctx context.Context, image string, opts []testcontainers.ContainerCustomizer) (*testenv.Server, error) {
	// The broker's port-2, a spare, the broker's port, its port+1, the
	// proxy's gRPC and remoting ports: consecutive, so that the proxy's
	// two ports cannot fall on the broker's neighbours.
	base, err := testenv.RocketMQFreePorts(6)
	if err != nil {
		return nil, err
	}
	brokerPort, grpcPort := base+2, base+4
	r, err := startNamesrv(ctx, image, opts)
	if err != nil {
		return nil, err
	}
	broker, proxy, err := testenv.RocketMQ5Config(rocketmqCluster, rocketmqBroker, r.internal, brokerPort, grpcPort, base+5,
		rocketmqHome+"/store")
	if err != nil {
		return nil, errors.Join(err, r.stop())
	}
	r.broker, err = startBroker(ctx, image, opts, r, brokerPort, []int{grpcPort},
		[]string{"sh", "mqbroker", "--enable-proxy", "-c", rocketmqHome + "/broker.conf", "-pc", rocketmqHome + "/proxy.json"},
		testcontainers.ContainerFile{Reader: strings.NewReader(string(broker)), ContainerFilePath: rocketmqHome + "/broker.conf", FileMode: 0o644},
		testcontainers.ContainerFile{Reader: strings.NewReader(string(proxy)), ContainerFilePath: rocketmqHome + "/proxy.json", FileMode: 0o644})
	if err != nil {
		return nil, errors.Join(err, r.stop())
	}
	version, err := testenv.RocketMQBrokerVersion(ctx, r.nameServer)
	if err != nil {
		return nil, errors.Join(err, r.stop())
	}
	proxyAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(grpcPort))
	return testenv.NewServer("rocketmq5", proxyAddr, release(version), map[string]string{
		"IDEMQ_ROCKETMQ5_NAMESRV": r.nameServer,
		"IDEMQ_ROCKETMQ5_PROXY":   proxyAddr,
	}, 0, r.stop), nil
}

// release turns the version a broker reports, "V4_9_7", into the release
// it names, "4.9.7", as testenv's servers give it.
func release(version string) string {
	return strings.ReplaceAll(strings.TrimPrefix(version, "V"), "_", ".")
}

// rocketmqContainers are a name server's and a broker's containers.
type rocketmqContainers struct {
	namesrv, broker testcontainers.Container
	// nameServer is the name server's address on the host, internal on
	// the engine's network.
	nameServer, internal string
}

func (r *rocketmqContainers) stop() error {
	// The broker first: a name server that goes first would leave it
	// retrying its registration until it is killed anyway.
	return terminate(r.broker, r.namesrv)()
}

func startNamesrv(ctx context.Context, image string, opts []testcontainers.ContainerCustomizer) (*rocketmqContainers, error) {
	c, err := testcontainers.Run(ctx, image, append(opts,
		testcontainers.WithCmd("sh", "mqnamesrv"),
		testcontainers.WithEnv(map[string]string{"JAVA_OPT_EXT": rocketmqNamesrvJVM}),
		testcontainers.WithExposedPorts("9876/tcp"),
		// NamesrvStartup prints this once it listens, in 4.x and 5.x.
		testcontainers.WithWaitStrategyAndDeadline(startTimeout, wait.ForLog("The Name Server boot success").WithStartupTimeout(startTimeout)))...)
	r := &rocketmqContainers{namesrv: c}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("name server: %w", err), r.stop())
	}
	if r.nameServer, err = endpoint(ctx, c, "9876/tcp"); err != nil {
		return nil, errors.Join(err, r.stop())
	}
	ip, err := c.ContainerIP(ctx)
	if err != nil {
		return nil, errors.Join(err, r.stop())
	}
	r.internal = net.JoinHostPort(ip, "9876")
	return r, nil
}

// startBroker runs the broker container with cmd and files, publishing
// brokerPort and more under their own numbers, and waits until the name
// server lists the broker at 127.0.0.1:brokerPort and every port in more
// accepts connections.
func startBroker(ctx context.Context, image string, opts []testcontainers.ContainerCustomizer, r *rocketmqContainers,
	brokerPort int, more []int, cmd []string, files ...testcontainers.ContainerFile) (testcontainers.Container, error) {
	ports := append([]int{brokerPort}, more...)
	var exposed []string
	bindings := nat.PortMap{}
	for _, p := range ports {
		port := nat.Port(strconv.Itoa(p) + "/tcp")
		exposed = append(exposed, string(port))
		bindings[port] = []nat.PortBinding{{HostIP: "127.0.0.1", HostPort: port.Port()}}
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(brokerPort))
	ready := wait.ForNop(func(ctx context.Context, target wait.StrategyTarget) error {
		return poll(ctx, target, func() error {
			masters, err := testenv.RocketMQMasters(ctx, r.nameServer)
			if err != nil {
				return err
			}
			if !slices.Contains(masters, addr) {
				return fmt.Errorf("name server lists brokers %q", masters)
			}
			var d net.Dialer
			for _, p := range more {
				conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
				if err != nil {
					return err
				}
				conn.Close()
			}
			return nil
		})
	})
	c, err := testcontainers.Run(ctx, image, append(opts,
		testcontainers.WithCmd(cmd...),
		testcontainers.WithEnv(map[string]string{"JAVA_OPT_EXT": rocketmqBrokerJVM}),
		testcontainers.WithExposedPorts(exposed...),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) { hc.PortBindings = bindings }),
		testcontainers.WithFiles(files...),
		testcontainers.WithWaitStrategyAndDeadline(startTimeout, ready))...)
	if err != nil {
		return c, fmt.Errorf("broker: %w", err)
	}
	return c, nil
}

// poll calls check until it succeeds, ctx ends or the container stops
// running: polling a dead broker until the deadline only wastes time.
func poll(ctx context.Context, target wait.StrategyTarget, check func() error) error {
	for {
		last := check()
		if last == nil {
			return nil
		}
		state, err := target.State(ctx)
		if err != nil {
			return err
		}
		if !state.Running {
			return fmt.Errorf("container exited (%d) (last check: %v)", state.ExitCode, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last check: %v)", ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
