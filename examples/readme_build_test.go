package examples_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/redisidgen"
	"github.com/idemq/idemq/internal/rediskey"
	"github.com/idemq/idemq/internal/rmqcall"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
)

// TestREADMEProgramsBuild copies every whole program of the README and of
// the guides under docs/, as it stands, into a fresh module (see
// readmeModule) and builds them: a program that stops compiling (a renamed
// API, a missing import) fails here. The README must hold a whole sender
// and a whole receiver.
func TestREADMEProgramsBuild(t *testing.T) {
	var progs []snippet
	var sender, receiver bool
	for _, s := range pageSnippets(t) {
		if !s.program() {
			continue
		}
		front := s.file == frontPage
		sender = sender || front && strings.Contains(s.code, ".NewProducer(")
		receiver = receiver || front && strings.Contains(s.code, `"github.com/idemq/idemq/consumer"`)
		progs = append(progs, s)
	}
	if !sender || !receiver {
		t.Fatalf("the README lacks a whole sender or receiver program (sender %v, receiver %v)", sender, receiver)
	}
	dir := readmeModule(t, progs)
	goIn(t, dir, "build", "./...")
	// A user of the producer, the consumer and the Redis store requires
	// and links no container tooling.
	gomodAfter, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	linked := goIn(t, dir, "list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", "./...")
	for _, m := range strings.Fields(string(gomodAfter) + "\n" + linked) {
		for _, bad := range []string{"testcontainers", "docker", "moby"} {
			if strings.Contains(m, bad) {
				t.Errorf("the README programs' module requires or links %s", m)
			}
		}
	}
}

var (
	// sentRE and appliedRE find the keys in what the README's sender and
	// receiver log.
	sentRE    = regexp.MustCompile(`sent order 42 with key (\S+)`)
	appliedRE = regexp.MustCompile(`applied order with key (\S+)`)
)

// TestREADMEProgramsRun builds the README's sender and receiver as
// TestREADMEProgramsBuild does and runs them as a user new to idemq would:
// the sender a few times, then the receiver, which must apply each order
// once, drain on SIGTERM and exit 0; started again, it applies none of them.
//
// The programs are the README's verbatim but for their literals: the two
// addresses become the test servers', and the topic, group and pool names
// of this run's own, so that nothing is shared with other tests on the
// servers.
func TestREADMEProgramsRun(t *testing.T) {
	const sends = 5
	redisAddr, nameServer := testenv.Redis(t), testenv.RocketMQ(t)
	run := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	topic, group, pool := "readme-"+run, "readme-group-"+run, "readme-senders-"+run
	literals := strings.NewReplacer(
		strconv.Quote("127.0.0.1:6379"), strconv.Quote(redisAddr),
		strconv.Quote("127.0.0.1:9876"), strconv.Quote(nameServer),
		strconv.Quote("orders"), strconv.Quote(topic),
		strconv.Quote("order-service"), strconv.Quote(group),
		strconv.Quote("senders"), strconv.Quote(pool),
	)
	// program returns the README's program from dir's Example name with
	// its literals replaced, failing t unless it then holds every one of
	// want: a README whose literals change must change them here too.
	program := func(dir, name string, want ...string) snippet {
		t.Helper()
		for _, s := range pageSnippets(t) {
			if s.file != frontPage || s.dir != dir || s.name != name || !s.program() {
				continue
			}
			s.code = literals.Replace(s.code)
			for _, w := range want {
				if !strings.Contains(s.code, strconv.Quote(w)) {
					t.Fatalf("the README's program from %s's %s no longer holds a literal this test replaces with %q", dir, name, w)
				}
			}
			return s
		}
		t.Fatalf("the README has no whole program from %s's %s", dir, name)
		return snippet{}
	}
	sender := program("remoting", "ExampleNewProducer", redisAddr, nameServer, topic, pool)
	receiver := program("remoting", "ExampleConcurrently", redisAddr, nameServer, topic, group)

	// One queue, so that the second receiver's last order comes after
	// every earlier one (see below).
	testenv.RocketMQTopic(t, topic, 1)
	// Without a record of the pool, the sender's first lease would wait
	// one lease (10 s); create it as `idemq workers create` would, with
	// the sender's Size and default Lease.
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	t.Cleanup(func() { rdb.Close() })
	leaser, err := redisidgen.New(rdb, redisidgen.Config{Pool: pool, Size: idgen.Twitter.MaxNode() + 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := leaser.Create(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The pool's keys share its hash tag (see redisidgen.Leaser).
		keys, _ := rdb.Keys(context.Background(), rediskey.HashTag("idemq", pool)+":*").Result()
		rdb.Del(context.Background(), keys...)
	})

	// groupState asks the broker which clients it counts in the group and
	// where the group's offsets stand: a receiver that applies nothing
	// either owns no queue or reads from past the orders.
	groupState := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		masters, err := rmqcall.Masters(ctx, nameServer, topic)
		if err != nil {
			return "broker view: " + err.Error()
		}
		var b strings.Builder
		for name, addr := range masters {
			for _, q := range []struct {
				what   string
				code   int
				fields map[string]string
			}{
				{"connections", reqGetConsumerConnectionList, map[string]string{"consumerGroup": group}},
				{"offsets", reqGetConsumeStats, map[string]string{"consumerGroup": group, "topic": topic}},
			} {
				body, err := rmqcall.Call(ctx, addr, q.code, q.fields, nil)
				fmt.Fprintf(&b, "broker %s %s: %s %v\n", name, q.what, body, err)
			}
		}
		return b.String()
	}

	// go build, not go run, so that the test's signal reaches the program.
	dir, bin := readmeModule(t, []snippet{sender, receiver}), t.TempDir()
	senderBin, receiverBin := filepath.Join(bin, "sender"), filepath.Join(bin, "receiver")
	goIn(t, dir, "build", "-o", senderBin, "./"+programDir(sender))
	goIn(t, dir, "build", "-o", receiverBin, "./"+programDir(receiver))
	send := func() string {
		t.Helper()
		out, err := exec.CommandContext(t.Context(), senderBin).CombinedOutput()
		if err != nil {
			t.Fatalf("sender: %v\n%s", err, out)
		}
		m := sentRE.FindSubmatch(out)
		if m == nil {
			t.Fatalf("sender logged no %q line:\n%s", sentRE, out)
		}
		return string(m[1])
	}

	sent := map[string]bool{}
	for range sends {
		sent[send()] = true
	}
	if len(sent) != sends {
		t.Fatalf("%d runs of the sender stamped %d distinct keys: %v", sends, len(sent), sent)
	}
	r := startProgram(t, receiverBin)
	r.await(t, fmt.Sprintf("the receiver to apply the %d orders sent before it started", sends), func(applied []string) bool {
		for k := range sent {
			if !slices.Contains(applied, k) {
				return false
			}
		}
		return true
	}, groupState)
	checkApplied(t, "the receiver", r.stop(t), sent)

	// Started again, the receiver applies only what is new: its group's
	// stored offset skips the orders it applied, and were that offset lost,
	// the dedupe store would keep them from the handler. Its one queue is
	// read in order, so by the time it applies last it has pulled every
	// order the offset did not skip.
	last := send()
	r = startProgram(t, receiverBin)
	r.await(t, "the restarted receiver to apply the order sent after the first one stopped", func(applied []string) bool {
		return slices.Contains(applied, last)
	}, groupState)
	checkApplied(t, "the restarted receiver", r.stop(t), map[string]bool{last: true})
	t.Logf("the receiver applied the %d orders sent before it started once each; restarted, it applied only the next one, %s", sends, last)
}

// checkApplied fails t unless applied holds each key of want once and
// nothing else.
func checkApplied(t *testing.T, who string, applied []string, want map[string]bool) {
	t.Helper()
	seen := map[string]int{}
	for _, k := range applied {
		seen[k]++
	}
	for k, n := range seen {
		switch {
		case !want[k]:
			t.Errorf("%s applied %s, a key it was not sent", who, k)
		case n > 1:
			t.Errorf("%s applied %s %d times", who, k, n)
		}
	}
	for k := range want {
		if seen[k] == 0 {
			t.Errorf("%s never applied %s", who, k)
		}
	}
}

// Request codes of RocketMQ's RequestCode.java that only groupState uses.
const (
	reqGetConsumerConnectionList = 203
	reqGetConsumeStats           = 208
)

// A program is a running README program and its output.
type program struct {
	cmd    *exec.Cmd
	out    testkit.Buffer
	exited chan struct{}
	err    error // cmd.Wait's, once exited is closed
}

// startProgram starts bin, killed when t ends if it still runs.
func startProgram(t *testing.T, bin string) *program {
	t.Helper()
	p := &program{cmd: exec.Command(bin), exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// applied returns the keys the program logged it applied, in order.
func (p *program) applied() []string {
	var keys []string
	for _, m := range appliedRE.FindAllStringSubmatch(p.out.String(), -1) {
		keys = append(keys, m[1])
	}
	return keys
}

// await polls until done holds for what the program applied, failing t
// with what and the program's output if it exits first or two minutes
// pass, then also with state's account of the broker's view: the deadline
// only keeps a broken program from hanging the test.
func (p *program) await(t *testing.T, what string, done func(applied []string) bool, state func() string) {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !done(p.applied()) {
		select {
		case <-p.exited:
			t.Fatalf("waiting for %s, it exited (%v):\n%s", what, p.err, p.out.String())
		case <-deadline:
			t.Fatalf("still waiting for %s after two minutes; it applied %q:\n%s\n%s", what, p.applied(), p.out.String(), state())
		case <-tick.C:
		}
	}
}

// stop sends the program SIGTERM, fails t unless it then exits 0, and
// returns the keys it applied.
func (p *program) stop(t *testing.T) []string {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(2 * time.Minute):
		t.Fatalf("still running two minutes after SIGTERM:\n%s", p.out.String())
	}
	if p.err != nil {
		t.Fatalf("exited after SIGTERM with %v:\n%s", p.err, p.out.String())
	}
	return p.applied()
}

// readmeModule writes progs, each in the directory programDir names, into
// a fresh module that requires this one (and the adapter modules, for the
// guides' programs of other clients), as a user who starts from the
// README would: its go.mod holds the README's go.mod lines. It returns the
// module's directory (see userModule: no network is needed).
func readmeModule(t *testing.T, progs []snippet) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := userModule(t, root, "example.com/readme", frontPageGoMod(t))
	for _, s := range progs {
		pkg := filepath.Join(dir, programDir(s))
		if err := os.Mkdir(pkg, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pkg, "main.go"), []byte(s.code), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// programDir names the directory of readmeModule's module that holds s.
func programDir(s snippet) string { return strings.ReplaceAll(s.dir, "/", "-") + "-" + s.name }

// goIn runs go with args in the module dir and returns its output, failing
// t on error.
func goIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	// -mod=mod lets go fill in the requirements a user's go mod tidy
	// would add.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s in a module of the README's programs: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
