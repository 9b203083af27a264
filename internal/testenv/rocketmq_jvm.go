package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// What the RocketMQ 4.x and 5.x servers share: running the JVMs, the name
// server, the broker configuration, ports, polling and error tails.

const (
	// rocketmqStartTimeout bounds the JVMs' start-up (not the jar
	// resolution) as a hang guard only: a JVM that dies is seen at once by
	// rocketmqPoll. They take 3-10 s on two quiet cores, but 5.5.0 took over
	// 90 s while a second CI run started its servers beside it, so the bound
	// is minutes, not a guess at a loaded machine's speed.
	rocketmqStartTimeout = 5 * time.Minute
	// rocketmqTopicTimeout bounds CreateRocketMQTopic's wait for the route; the broker
	// registers a new topic with the name server before it answers, so the
	// first poll normally succeeds.
	rocketmqTopicTimeout = 30 * time.Second
	// rocketmqCallTimeout bounds one request to a name server or broker, as
	// a hang guard: a topic's creation took over 5 s (the bound before)
	// while make test ran beside a benchmark, at a load of 14 on two cores.
	rocketmqCallTimeout  = 30 * time.Second
	rocketmqPollInterval = 50 * time.Millisecond
)

// rocketmqJVMFlags are the flags of every RocketMQ JVM: RocketMQ keeps name
// server state, store config and logs under ~ by default (5.x: all its logs,
// in ~/logs/rocketmqlogs); keep everything under dir. So too its temporary
// files: the 5.x proxy writes a self-signed certificate and key for its
// TLS port at every start (Netty's keyutil_localhost_*), which it never
// removes.
func rocketmqJVMFlags(dir, lib string) []string {
	return []string{
		"-Duser.home=" + dir,
		"-Djava.io.tmpdir=" + dir,
		"-Drocketmq.home.dir=" + filepath.Join(dir, "home"),
		"-cp", filepath.Join(lib, "*"),
	}
}

// rocketmqBrokerJVMFlags are the extra flags of a broker's JVM (5.x: the
// proxy's, which runs the broker).
var rocketmqBrokerJVMFlags = []string{
	"-Xmx512m",
	// MappedFile unmaps commit log files through JDK internals.
	"--add-opens", "java.base/java.nio=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
	"--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
	// The broker refuses writes above 90 % disk use by default; a
	// developer's nearly full disk must not fail the tests.
	"-Drocketmq.broker.diskSpaceWarningLevelRatio=0.99",
	"-Drocketmq.broker.diskSpaceCleanForciblyRatio=0.98",
}

// RocketMQBrokerConfig returns the broker configuration lines both releases
// understand. RocketMQ silently ignores unknown keys, so each one is a setter
// name checked against BrokerConfig, NettyServerConfig and
// MessageStoreConfig of 4.9.7 and 5.x.
func RocketMQBrokerConfig(cluster, name, nameServer string, port int, store string) []string {
	return []string{
		"brokerClusterName=" + cluster,
		"brokerName=" + name,
		// Otherwise the broker registers the first non-loopback address.
		"brokerIP1=127.0.0.1",
		"namesrvAddr=" + nameServer,
		// The broker also listens on listenPort-2 and listenPort+1.
		"listenPort=" + strconv.Itoa(port),
		"storePathRootDir=" + store,
		// Defaults are 1 GiB commit log files, 6 MB consume queue files
		// and 420 MB index files.
		"mappedFileSizeCommitLog=67108864",
		"mappedFileSizeConsumeQueue=600000", // a multiple of 20
		"maxHashSlotNum=50000",
		"maxIndexNum=200000",
		// Lets a producer send to a topic nobody created.
		"autoCreateTopicEnable=true",
		// The default 200 ms answers "broker busy" on a slow machine.
		"waitTimeMillsInSendQueue=3000",
		"flushDiskType=ASYNC_FLUSH",
		// A consumer's retry waits for delay level 3 + its retry count:
		// 10 s, 30 s, 1 m, ... by default. At 1 s per level a test sees
		// redeliveries, and the dead-letter queue after 16 of them, within
		// seconds; the number of levels, hence every other rule, is unchanged.
		"messageDelayLevel=" + strings.TrimSpace(strings.Repeat("1s ", 18)),
		// The broker asks the producer about a half (transactional)
		// message older than transactionTimeOut (default 6 s) at every
		// transactionCheckInterval (default 60 s in 4.9.7, 30 s in 5.x): at
		// 1 s each a test sees the check-back within about 2 s.
		"transactionTimeOut=1000",
		"transactionCheckInterval=1000",
		// 5.x writes the records of resolved half messages in batches, every
		// 3 s by default: longer than the 1 s check interval above, so a
		// committed message was checked back, and committed, twice. At
		// 100 ms the record lands between two checks, as it does with the
		// production defaults (3 s against 30 s). 4.9.7 has no such setting.
		"transactionOpBatchInterval=100",
	}
}

// rocketmqStartProcess runs java with args, its output to dir/name.out and
// log. Stop kills it outright: the store is thrown away, and a graceful
// broker shutdown takes seconds.
func rocketmqStartProcess(java, dir, name string, log io.Writer, args []string) (*process, error) {
	p, err := startProcess(log, filepath.Join(dir, name+".out"), nil, java,
		append([]string{"-Didemq.rocketmq.log=" + filepath.Join(dir, name+".log")}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p.name, p.signal = name, syscall.SIGKILL
	return p, nil
}

// rocketmqStartNamesrv runs a name server whose configuration is
// dir/namesrv.conf and waits until it accepts connections at addr.
func rocketmqStartNamesrv(ctx context.Context, java, lib, dir, addr string, log io.Writer) (*process, error) {
	p, err := rocketmqStartProcess(java, dir, "namesrv", log,
		slices.Concat([]string{"-Xmx128m"}, rocketmqJVMFlags(dir, lib),
			[]string{"org.apache.rocketmq.namesrv.NamesrvStartup", "-c", filepath.Join(dir, "namesrv.conf")}))
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	if err := rocketmqPoll(ctx, []*process{p}, func() error {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return conn.Close()
	}); err != nil {
		return p, fmt.Errorf("name server not ready: %w", err)
	}
	return p, nil
}

// rocketmqWaitRegistered waits until the name server at nameServer lists
// brokerAddr as a master. A broker registers as the last step of its start,
// after its store and listeners are up.
func rocketmqWaitRegistered(ctx context.Context, procs []*process, nameServer, brokerAddr string) error {
	return rocketmqPoll(ctx, procs, func() error {
		masters, err := rocketmqMasters(ctx, nameServer)
		if err != nil {
			return err
		}
		if !slices.Contains(masters, brokerAddr) {
			return fmt.Errorf("name server lists brokers %q", masters)
		}
		return nil
	})
}

// rocketmqPoll calls check until it succeeds, ctx ends or one of procs
// exits: polling a dead server until the timeout only wastes time.
func rocketmqPoll(ctx context.Context, procs []*process, check func() error) error {
	t := time.NewTicker(rocketmqPollInterval)
	defer t.Stop()
	for {
		last := check()
		if last == nil {
			return nil
		}
		for _, p := range procs {
			if p == nil {
				continue
			}
			if err := p.exited(); err != nil {
				return fmt.Errorf("%s %w", p.name, err)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last check: %v)", ctx.Err(), last)
		case <-t.C:
		}
	}
}

// rocketmqTails returns the last lines of the named files under dir (n lines
// each), for errors.
func rocketmqTails(dir string, files []string, n int) string {
	var b strings.Builder
	for _, f := range files {
		path := filepath.Join(dir, f)
		if tail, err := tailFile(path, n); err == nil && tail != "" {
			fmt.Fprintf(&b, "\n--- %s (tail) ---\n%s", path, tail)
		}
	}
	return b.String()
}

// RocketMQFreePorts returns the first of n consecutive ports that are free
// now, checked together on every interface since that is where RocketMQ
// listens (4.9.7 has no bind address setting). A broker listens on its port
// and on port-2 and port+1, hence consecutive ports. They are drawn from
// 10000-29999, below the ephemeral ranges of Linux (32768-60999) and macOS:
// outgoing connections take ephemeral ports at any moment, and the JVMs bind
// theirs seconds after the check. Should another process still take one,
// start-up fails with "Address already in use" in the error.
func RocketMQFreePorts(n int) (int, error) {
	for range 100 {
		base := 10000 + rand.IntN(20000-n)
		var held []net.Listener
		for p := base; p < base+n; p++ {
			if l, err := net.Listen("tcp", ":"+strconv.Itoa(p)); err == nil {
				held = append(held, l)
			}
		}
		for _, l := range held {
			l.Close()
		}
		if len(held) == n {
			return base, nil
		}
	}
	return 0, fmt.Errorf("testenv: rocketmq: no %d consecutive free ports in 10000-29999", n)
}

// rocketmqLockedWriter serialises the writes of the JVMs' output copiers
// to the caller's writer, which need not be safe for concurrent use.
type rocketmqLockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *rocketmqLockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// rocketmqStopAll stops procs in order and joins their errors.
func rocketmqStopAll(procs ...*process) error {
	var errs []error
	for _, p := range procs {
		if p != nil {
			errs = append(errs, p.stop())
		}
	}
	return errors.Join(errs...)
}

// rocketmqPrepare does what every start needs first: it finds java, makes
// dir absolute, resolves the jars of release (with the proxy's if proxy) and
// reads their version, and wraps log, nil for none, so that the JVMs' output
// copiers can share it. Errors are prefixed with name.
func rocketmqPrepare(ctx context.Context, name, release string, proxy bool, dir string, log io.Writer) (java, absDir, lib, version string, w io.Writer, err error) {
	if log == nil {
		log = io.Discard
	}
	if java, err = exec.LookPath("java"); err != nil {
		return "", "", "", "", nil, fmt.Errorf("testenv: %s: %w", name, err)
	}
	if absDir, err = filepath.Abs(dir); err != nil {
		return "", "", "", "", nil, fmt.Errorf("testenv: %s: %w", name, err)
	}
	if lib, err = RocketMQInstall(ctx, release, proxy); err != nil {
		return "", "", "", "", nil, err
	}
	if version, err = rocketmqJarVersion(lib); err != nil {
		return "", "", "", "", nil, err
	}
	return java, absDir, lib, version, &rocketmqLockedWriter{w: log}, nil
}
