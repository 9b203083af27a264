package kafka_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
)

// The fault tests run receivers in child processes of the test binary
// (see receiverChild) against real servers, and count each key's effects
// exactly from the lines the children say: nothing may be lost, and a key
// may be applied twice only where a process was killed between a
// handler's effect and its record (at most one record per partition in
// flight).

// TestFaultFailingHandlers: one key in five fails its first two attempts,
// one in seven panics on its first; each is retried in process (after
// 100 ms), holding its partition back, and applied once.
func TestFaultFailingHandlers(t *testing.T) {
	t.Parallel()
	brokers := []string{testenv.Kafka(t)}
	topic, group := unique("fault-fail"), unique("fault-fail-group")
	createTopic(t, brokers, topic, 4)
	e := newEffects()
	a, lines := startReceiver(t, e, "a", receiverSettings{Brokers: brokers, Topic: topic, Group: group,
		Redis: testenv.Redis(t), Fail: 2, Lease: 5 * time.Second, Retry: 100 * time.Millisecond})
	sent := sendKeys(t, producer(t, brokers), topic, 200)
	tl := settle(t, e, sent, 2*time.Minute)
	doubledAtMost(t, tl, 0)
	said := drainReceiver(t, a, lines)
	t.Logf("a: %s", said)
	if strings.Contains(said, " failed=0 ") {
		t.Error("no handler failed: the test proved nothing")
	}
}

// TestFaultKill kills (SIGKILL) one of two receivers while both run
// handlers: the other takes its partitions over once its session ends,
// and gets its uncommitted records again, suppressed where they were
// recorded.
func TestFaultKill(t *testing.T) {
	t.Parallel()
	brokers := []string{testenv.Kafka(t)}
	topic, group := unique("fault-kill"), unique("fault-kill-group")
	createTopic(t, brokers, topic, 4)
	e := newEffects()
	s := receiverSettings{Brokers: brokers, Topic: topic, Group: group, Redis: testenv.Redis(t),
		Delay: 20 * time.Millisecond, Lease: 2 * time.Second}
	a, _ := startReceiver(t, e, "a", s)
	b, blines := startReceiver(t, e, "b", s)
	sent := sendKeys(t, producer(t, brokers), topic, 400)
	waitApplied(t, e, "a", 40)
	waitApplied(t, e, "b", 40)
	a.Kill(t)
	unfinished(t, e, sent)
	tl := settle(t, e, sent, 2*time.Minute)
	// a ran at most one record per partition it owned (4 at most).
	doubledAtMost(t, tl, 4)
	t.Logf("b: %s", drainReceiver(t, b, blines))
}

// TestFaultRebalance adds a receiver to a group under way, then drains
// the first one while its handlers run: the revoked and the drained
// partitions' records are each applied once.
func TestFaultRebalance(t *testing.T) {
	t.Parallel()
	brokers := []string{testenv.Kafka(t)}
	topic, group := unique("fault-rebalance"), unique("fault-rebalance-group")
	createTopic(t, brokers, topic, 4)
	e := newEffects()
	s := receiverSettings{Brokers: brokers, Topic: topic, Group: group, Redis: testenv.Redis(t),
		Delay: 20 * time.Millisecond, Lease: 5 * time.Second}
	a, alines := startReceiver(t, e, "a", s)
	p := producer(t, brokers)
	sent := sendKeys(t, p, topic, 150)
	waitApplied(t, e, "a", 30)
	b, blines := startReceiver(t, e, "b", s)
	// a alone may apply all that was sent before the group gives b its
	// partitions (it did once, and b waited for records in vain): keep a
	// few records unapplied until b has applied some.
	testkit.WaitFor(t, "b to apply records", func() bool {
		if e.total() > len(sent)-20 {
			sent = append(sent, sendKeys(t, p, topic, 10)...)
		}
		return appliedBy(e, "b") >= 30
	})
	unfinished(t, e, sent)
	t.Logf("a: %s", drainReceiver(t, a, alines))
	tl := settle(t, e, sent, 2*time.Minute)
	doubledAtMost(t, tl, 0)
	t.Logf("b: %s", drainReceiver(t, b, blines))
}

// TestFaultBrokerRestart kills the broker (SIGKILL) while a receiver runs
// handlers, and starts it again on its data: the receiver goes on, and
// what it had not committed comes again, suppressed.
func TestFaultBrokerRestart(t *testing.T) {
	t.Parallel()
	k := testenv.StartPrivateKafka(t, 1)
	brokers := k.Brokers()
	topic, group := unique("fault-broker"), unique("fault-broker-group")
	createTopic(t, brokers, topic, 4)
	e := newEffects()
	a, lines := startReceiver(t, e, "a", receiverSettings{Brokers: brokers, Topic: topic, Group: group,
		Redis: testenv.Redis(t), Delay: 5 * time.Millisecond, Lease: 5 * time.Second})
	p := producer(t, brokers)
	sent := sendKeys(t, p, topic, 300)
	waitApplied(t, e, "a", 50)
	if err := k.Kill(0); err != nil {
		t.Fatal(err)
	}
	unfinished(t, e, sent)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := k.Start(ctx, 0); err != nil {
		t.Fatal(err)
	}
	sent = append(sent, sendKeys(t, p, topic, 100)...)
	tl := settle(t, e, sent, 2*time.Minute)
	doubledAtMost(t, tl, 0)
	t.Logf("a: %s", drainReceiver(t, a, lines))
}

// TestFaultStoreDown kills the dedupe store (Redis, SIGKILL, keeping what
// it acknowledged on disk) for longer than the consumer's store-down wait
// (1 s in the children) and starts it again: the receiver waits in
// process, holding its partitions, and applies each record once.
func TestFaultStoreDown(t *testing.T) {
	t.Parallel()
	brokers := []string{testenv.Kafka(t)}
	r := testenv.StartPrivateRedis(t, "--appendonly", "yes", "--appendfsync", "always")
	topic, group := unique("fault-store"), unique("fault-store-group")
	createTopic(t, brokers, topic, 4)
	e := newEffects()
	a, lines := startReceiver(t, e, "a", receiverSettings{Brokers: brokers, Topic: topic, Group: group,
		Redis: r.Addr(), Delay: 10 * time.Millisecond, Lease: 5 * time.Second})
	sent := sendKeys(t, producer(t, brokers), topic, 200)
	waitApplied(t, e, "a", 30)
	if err := r.Kill(); err != nil {
		t.Fatal(err)
	}
	// Count what a applied before the kill, all of it: its lines may still
	// be on their way (a count taken at once was one short of them).
	a.Tell(t, "mark")
	select {
	case l := <-lines:
		if l != "marked" {
			t.Fatalf("a said %q, want marked", l)
		}
	case <-time.After(time.Minute):
		t.Fatalf("a did not mark: %s", a.Stderr())
	}
	unfinished(t, e, sent)
	down := e.total()
	time.Sleep(5 * time.Second) // the outage: five times the wait
	if n := e.total() - down; n > 4 {
		t.Errorf("%d records applied while the store was down; want at most the 4 claimed before", n)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	tl := settle(t, e, sent, 2*time.Minute)
	doubledAtMost(t, tl, 0)
	t.Logf("a: %s", drainReceiver(t, a, lines))
}

// waitApplied waits until the child name has applied at least n records.
func waitApplied(t *testing.T, e *effects, name string, n int) {
	t.Helper()
	testkit.WaitFor(t, name+" to apply records", func() bool { return appliedBy(e, name) >= n })
}

// appliedBy is how many records the child name has applied.
func appliedBy(e *effects, name string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, v := range e.by[name] {
		n += v
	}
	return n
}

// unfinished fails t unless records of sent are still to be applied: the
// fault came too late to prove anything.
func unfinished(t *testing.T, e *effects, sent []string) {
	t.Helper()
	if n := e.total(); n >= len(sent) {
		t.Fatalf("all %d records were applied before the fault: the test proves nothing", n)
	}
}

// TestFaultPausedMember stops a receiver (SIGSTOP) past its session: the
// group gives its partitions to the other, which runs them once the
// stopped one's leases end; resumed, the stopped one finds itself fenced,
// loses its partitions and commits nothing of theirs. A handler the stop
// caught between its effect and its record may double (one per
// partition it owned).
func TestFaultPausedMember(t *testing.T) {
	t.Parallel()
	brokers := []string{testenv.Kafka(t)}
	topic, group := unique("fault-pause"), unique("fault-pause-group")
	createTopic(t, brokers, topic, 4)
	e := newEffects()
	s := receiverSettings{Brokers: brokers, Topic: topic, Group: group, Redis: testenv.Redis(t),
		Delay: 20 * time.Millisecond, Lease: 2 * time.Second}
	a, alines := startReceiver(t, e, "a", s)
	b, blines := startReceiver(t, e, "b", s)
	sent := sendKeys(t, producer(t, brokers), topic, 400)
	waitApplied(t, e, "a", 40)
	waitApplied(t, e, "b", 40)
	a.Pause(t)
	unfinished(t, e, sent)
	time.Sleep(9 * time.Second) // past the 6 s session: b takes a's partitions
	a.Resume(t)
	tl := settle(t, e, sent, 2*time.Minute)
	doubledAtMost(t, tl, 4)
	t.Logf("a: %s", drainReceiver(t, a, alines))
	t.Logf("b: %s", drainReceiver(t, b, blines))
}
