package testenv

import (
	"bytes"
	"context"
	_ "embed" // the pom and logback config below
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// rocketmqVersion is the Apache RocketMQ release StartRocketMQ runs. 4.9.7 is
// the newest 4.x on Maven Central (4.9.8 was never published there) and, unlike
// 5.x, needs no gRPC, OpenTelemetry or RocksDB jars.
const rocketmqVersion = "4.9.7"

const (
	// rocketmqBrokerName names the one broker; it is also a topic the broker
	// registers, so tests must not use it as a topic name.
	rocketmqBrokerName = "idemq-testenv-broker"

	// rocketmqStartTimeout bounds the JVMs' start-up (not the jar
	// resolution): they take 3-10 s on two busy cores; waiting longer only
	// hides a broken start.
	rocketmqStartTimeout = 90 * time.Second
	// rocketmqTopicTimeout bounds CreateRocketMQTopic's wait for the route; the broker
	// registers a new topic with the name server before it answers, so the
	// first poll normally succeeds.
	rocketmqTopicTimeout = 30 * time.Second
	// rocketmqCallTimeout bounds one request to a name server or broker.
	rocketmqCallTimeout  = 5 * time.Second
	rocketmqPollInterval = 50 * time.Millisecond
)

var (
	// rocketmqPOM resolves the server jars; rocketmqInstall passes
	// -Drocketmq.version so that rocketmqVersion is the one place to change.
	//go:embed rocketmq/pom.xml
	rocketmqPOM []byte

	// rocketmqLogback replaces the distribution's conf/ directory, without
	// which NamesrvStartup and BrokerStartup exit.
	//go:embed rocketmq/logback.xml
	rocketmqLogback []byte
)

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
	lib, err := rocketmqInstall(ctx)
	if err != nil {
		return nil, err
	}
	version, err := rocketmqJarVersion(lib)
	if err != nil {
		return nil, err
	}
	nsPort, brokerPort, err := rocketmqPorts()
	if err != nil {
		return nil, err
	}
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
	common := []string{
		// RocketMQ keeps name server state, store config and client logs
		// under ~ by default; keep everything under dir.
		"-Duser.home=" + s.dir,
		"-Drocketmq.home.dir=" + filepath.Join(s.dir, "home"),
		"-cp", filepath.Join(lib, "*"),
	}
	var err error
	s.namesrv, err = rocketmqStartProcess(java, s.dir, "namesrv", log,
		slices.Concat([]string{"-Xmx128m"}, common,
			[]string{"org.apache.rocketmq.namesrv.NamesrvStartup", "-c", filepath.Join(s.dir, "namesrv.conf")}))
	if err != nil {
		return err
	}
	var d net.Dialer
	if err := s.poll(ctx, func() error {
		conn, err := d.DialContext(ctx, "tcp", s.nameServer)
		if err != nil {
			return err
		}
		return conn.Close()
	}); err != nil {
		return fmt.Errorf("name server not ready: %w", err)
	}

	brokerFlags := []string{
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
	s.broker, err = rocketmqStartProcess(java, s.dir, "broker", log,
		slices.Concat(brokerFlags, common,
			[]string{"org.apache.rocketmq.broker.BrokerStartup", "-c", filepath.Join(s.dir, "broker.conf")}))
	if err != nil {
		return err
	}
	// The broker registers as the last step of its start, after its store
	// and listeners are up.
	if err := s.poll(ctx, func() error {
		masters, err := rocketmqMasters(ctx, s.nameServer)
		if err != nil {
			return err
		}
		if !slices.Contains(masters, s.brokerAddr) {
			return fmt.Errorf("name server lists brokers %q", masters)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("broker not registered: %w", err)
	}
	return nil
}

// writeConfig writes the logback files RocketMQ insists on and the name
// server and broker configuration. RocketMQ silently ignores unknown keys, so
// each one here is a setter name checked against 4.9.7.
func (s *RocketMQServer) writeConfig(nsPort, brokerPort int) error {
	conf := filepath.Join(s.dir, "home", "conf")
	if err := os.MkdirAll(conf, 0o755); err != nil {
		return fmt.Errorf("testenv: rocketmq: %w", err)
	}
	broker := strings.Join([]string{
		"brokerName=" + rocketmqBrokerName,
		// Otherwise the broker registers the first non-loopback address.
		"brokerIP1=127.0.0.1",
		"namesrvAddr=" + s.nameServer,
		// The broker also listens on listenPort-2 and listenPort+1.
		"listenPort=" + strconv.Itoa(brokerPort),
		"storePathRootDir=" + filepath.Join(s.dir, "store"),
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
	}, "\n") + "\n"
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

// poll calls check until it succeeds, ctx ends or a JVM exits: polling a dead
// server until the timeout only wastes time.
func (s *RocketMQServer) poll(ctx context.Context, check func() error) error {
	t := time.NewTicker(rocketmqPollInterval)
	defer t.Stop()
	for {
		last := check()
		if last == nil {
			return nil
		}
		for _, p := range []*process{s.namesrv, s.broker} {
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
	s.stopOnce.Do(func() {
		var errs []error
		for _, p := range []*process{s.broker, s.namesrv} {
			if p != nil {
				errs = append(errs, p.stop())
			}
		}
		s.stopErr = errors.Join(errs...)
	})
	return s.stopErr
}

// tails returns the last lines of every output and log file, for errors.
func (s *RocketMQServer) tails() string {
	var b strings.Builder
	// The .out files hold little but errors; a start-up exception comes
	// before the shutdown hook's own stack trace.
	for _, f := range []struct {
		name  string
		lines int
	}{{"namesrv.out", 40}, {"namesrv.log", 10}, {"broker.out", 40}, {"broker.log", 10}} {
		path := filepath.Join(s.dir, f.name)
		if tail, err := tailFile(path, f.lines); err == nil && tail != "" {
			fmt.Fprintf(&b, "\n--- %s (tail) ---\n%s", path, tail)
		}
	}
	return b.String()
}

// CreateRocketMQTopic creates topic, or updates its queue counts, on every
// master broker registered with the name server at nameServer ("host:port"),
// and waits until the name server returns a route for it: a push consumer's
// Start fails while its topic has no route. Each broker gets queues read and
// write queues. It works with any RocketMQ 4.x cluster, not only one
// StartRocketMQ started.
func CreateRocketMQTopic(ctx context.Context, nameServer, topic string, queues int) error {
	if queues < 1 {
		return fmt.Errorf("testenv: rocketmq: create topic %q: %d queues, want at least 1", topic, queues)
	}
	masters, err := rocketmqMasters(ctx, nameServer)
	if err != nil {
		return fmt.Errorf("testenv: rocketmq: create topic %q: %w", topic, err)
	}
	if len(masters) == 0 {
		return fmt.Errorf("testenv: rocketmq: create topic %q: no master broker registered with %s", topic, nameServer)
	}
	for _, addr := range masters {
		_, err := rocketmqCall(ctx, addr, rocketmqReqUpdateAndCreateTopic, map[string]string{
			"topic":           topic,
			"defaultTopic":    "TBW102", // required by the request, unused by creation
			"readQueueNums":   strconv.Itoa(queues),
			"writeQueueNums":  strconv.Itoa(queues),
			"perm":            "6", // read and write
			"topicFilterType": "SINGLE_TAG",
			"topicSysFlag":    "0",
			"order":           "false",
		})
		if err != nil {
			return fmt.Errorf("testenv: rocketmq: create topic %q on %s: %w", topic, addr, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, rocketmqTopicTimeout)
	defer cancel()
	t := time.NewTicker(rocketmqPollInterval)
	defer t.Stop()
	for {
		_, err := rocketmqCall(ctx, nameServer, rocketmqReqGetRouteInfoByTopic, map[string]string{"topic": topic})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testenv: rocketmq: create topic %q: no route: %w (last answer: %v)", topic, ctx.Err(), err)
		case <-t.C:
		}
	}
}

// Request codes of RocketMQ's remoting protocol (RequestCode.java).
const (
	rocketmqReqUpdateAndCreateTopic = 17
	rocketmqReqGetRouteInfoByTopic  = 105
	rocketmqReqGetBrokerClusterInfo = 106
	rocketmqReqGetBrokerRuntimeInfo = 28
)

// RocketMQBrokerVersion asks the first master broker registered with the
// name server at nameServer for its version, such as "V4_9_7": tests log it
// whether they started the broker or were given one.
func RocketMQBrokerVersion(ctx context.Context, nameServer string) (string, error) {
	masters, err := rocketmqMasters(ctx, nameServer)
	if err != nil {
		return "", fmt.Errorf("testenv: rocketmq: broker version: %w", err)
	}
	if len(masters) == 0 {
		return "", fmt.Errorf("testenv: rocketmq: broker version: no master broker registered with %s", nameServer)
	}
	// A broker that started a moment ago fails this request until it has
	// sampled its statistics once.
	ctx, cancel := context.WithTimeout(ctx, rocketmqTopicTimeout)
	defer cancel()
	var body []byte
	for {
		if body, err = rocketmqCall(ctx, masters[0], rocketmqReqGetBrokerRuntimeInfo, nil); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("testenv: rocketmq: broker version: %w", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	var info struct {
		Table map[string]string `json:"table"`
	}
	if err := json.Unmarshal(body, &info); err != nil {
		return "", fmt.Errorf("testenv: rocketmq: broker version: %w", err)
	}
	v := info.Table["brokerVersionDesc"]
	if v == "" {
		return "", fmt.Errorf("testenv: rocketmq: broker version: %s did not say", masters[0])
	}
	return v, nil
}

// rocketmqMasterAddrsRE finds the master (broker id 0) in each brokerAddrs
// map of a cluster info body. The name server writes integer map keys
// unquoted ({0:"host:port"}), which encoding/json rejects.
var rocketmqMasterAddrsRE = regexp.MustCompile(`"brokerAddrs":\{(?:[^}]*,)?0:"([^"]+)"`)

// rocketmqMasters returns the addresses of the master brokers registered
// with the name server.
func rocketmqMasters(ctx context.Context, nameServer string) ([]string, error) {
	body, err := rocketmqCall(ctx, nameServer, rocketmqReqGetBrokerClusterInfo, nil)
	if err != nil {
		return nil, fmt.Errorf("cluster info: %w", err)
	}
	var masters []string
	for _, m := range rocketmqMasterAddrsRE.FindAllSubmatch(body, -1) {
		masters = append(masters, string(m[1]))
	}
	return masters, nil
}

// rocketmqCall sends one request over RocketMQ's remoting protocol (JSON
// headers, one request per connection) and returns the body of a successful
// response. rocketmq-client-go's admin client cannot list brokers, drops the
// broker's answer to a topic creation and logs every call to standard output.
func rocketmqCall(ctx context.Context, addr string, code int, fields map[string]string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, rocketmqCallTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	// Unblocks the reads and writes below when ctx ends.
	defer context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })()

	header, err := json.Marshal(struct {
		Code      int               `json:"code"`
		Language  string            `json:"language"`
		Version   int               `json:"version"`
		Opaque    int               `json:"opaque"`
		Flag      int               `json:"flag"`
		ExtFields map[string]string `json:"extFields,omitempty"`
	}{Code: code, Language: "GO", Version: 317, Opaque: 1, ExtFields: fields})
	if err != nil {
		return nil, err
	}
	// Frame: total length, then header length whose high byte 0 says JSON.
	frame := binary.BigEndian.AppendUint32(nil, uint32(4+len(header)))
	frame = binary.BigEndian.AppendUint32(frame, uint32(len(header)))
	if _, err := conn.Write(append(frame, header...)); err != nil {
		return nil, err
	}

	var size uint32
	if err := binary.Read(conn, binary.BigEndian, &size); err != nil {
		return nil, err
	}
	if size < 4 || size > 16<<20 {
		return nil, fmt.Errorf("response frame of %d bytes", size)
	}
	resp := make([]byte, size)
	if _, err := io.ReadFull(conn, resp); err != nil {
		return nil, err
	}
	mark := binary.BigEndian.Uint32(resp)
	headerLen := mark & 0xFFFFFF
	if mark>>24 != 0 || 4+headerLen > size {
		return nil, fmt.Errorf("response header mark %#x: not a JSON header", mark)
	}
	var h struct {
		Code   int    `json:"code"`
		Remark string `json:"remark"`
	}
	if err := json.Unmarshal(resp[4:4+headerLen], &h); err != nil {
		return nil, fmt.Errorf("response header: %w", err)
	}
	if h.Code != 0 {
		return nil, fmt.Errorf("response code %d: %s", h.Code, h.Remark)
	}
	return resp[4+headerLen:], nil
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

// rocketmqInstall returns the directory holding the server jars, resolving
// them with Maven on first use. They are resolved into a temporary sibling
// that is renamed into place, so concurrent test processes never see a
// partial directory; the loser of a race discards its copy.
func rocketmqInstall(ctx context.Context) (string, error) {
	root := os.Getenv("IDEMQ_CACHE_DIR")
	if root == "" {
		userCache, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("testenv: rocketmq: %w", err)
		}
		root = filepath.Join(userCache, "idemq")
	}
	home := filepath.Join(root, "rocketmq-"+rocketmqVersion)
	lib := filepath.Join(home, "lib")
	if _, err := os.Stat(lib); err == nil {
		return lib, nil
	}

	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return "", fmt.Errorf("testenv: rocketmq: resolve jars: %w", err)
	}
	if err := os.MkdirAll(home, 0o755); err != nil {
		return "", fmt.Errorf("testenv: rocketmq: %w", err)
	}
	tmp, err := os.MkdirTemp(home, ".lib-*")
	if err != nil {
		return "", fmt.Errorf("testenv: rocketmq: %w", err)
	}
	defer os.RemoveAll(tmp)
	pom := filepath.Join(tmp, "pom.xml")
	if err := os.WriteFile(pom, rocketmqPOM, 0o644); err != nil {
		return "", fmt.Errorf("testenv: rocketmq: %w", err)
	}
	// The output goes to the error only: Maven 3.8 prints stray colour
	// codes even with -q -B.
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, mvn, "-q", "-B", "-f", pom, "dependency:copy-dependencies",
		"-DoutputDirectory="+filepath.Join(tmp, "lib"), "-Drocketmq.version="+rocketmqVersion)
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("testenv: rocketmq: resolve jars with %s: %w\n%s", pom, err, lastLines(out.String(), 30))
	}
	if err := os.Rename(filepath.Join(tmp, "lib"), lib); err != nil {
		if _, statErr := os.Stat(lib); statErr == nil {
			return lib, nil // another process resolved them first
		}
		return "", fmt.Errorf("testenv: rocketmq: %w", err)
	}
	return lib, nil
}

// rocketmqJarVersion reads the release from the broker jar's name.
func rocketmqJarVersion(lib string) (string, error) {
	jars, err := filepath.Glob(filepath.Join(lib, "rocketmq-broker-*.jar"))
	if err != nil || len(jars) != 1 {
		return "", fmt.Errorf("testenv: rocketmq: want one rocketmq-broker jar in %s, found %d (remove the directory to resolve again)", lib, len(jars))
	}
	return strings.TrimSuffix(strings.TrimPrefix(filepath.Base(jars[0]), "rocketmq-broker-"), ".jar"), nil
}

// rocketmqPorts returns a name server port and a broker port. The broker
// also listens on its port-2 and port+1, so four consecutive ports are
// checked free together, on every interface since that is where RocketMQ
// 4.9.7 listens (it has no bind address setting). They are drawn from
// 10000-29999, below the ephemeral ranges of Linux (32768-60999) and macOS:
// outgoing connections take ephemeral ports at any moment, and the JVMs bind
// theirs seconds after the check. Should another process still take one,
// start-up fails with "Address already in use" in the error.
func rocketmqPorts() (nsPort, brokerPort int, err error) {
	for range 100 {
		base := 10000 + rand.IntN(20000-4)
		var held []net.Listener
		for p := base; p < base+4; p++ {
			if l, err := net.Listen("tcp", ":"+strconv.Itoa(p)); err == nil {
				held = append(held, l)
			}
		}
		for _, l := range held {
			l.Close()
		}
		if len(held) == 4 {
			return base + 1, base + 2, nil
		}
	}
	return 0, 0, errors.New("testenv: rocketmq: no four consecutive free ports in 10000-29999")
}

// rocketmqLockedWriter serialises the writes of the two JVMs' output copiers
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
