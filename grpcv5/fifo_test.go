package grpcv5_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-clients/golang/v5"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/grpcv5"
	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/msgkey"
)

// fifoGroups is how many message groups the FIFO test's producer sends to,
// over fifoQueues queues.
const (
	fifoGroups = 8
	fifoQueues = 8
)

// fifoRun is a FIFO consumer group of PushConsumers over a topic that a
// producer keeps sending to, a message to each message group in turn, and
// what the consumers ran.
type fifoRun struct {
	f       *fixture
	members map[string]fifoMember
	mu      sync.Mutex
	got     []fifoRan
}

// fifoMember is one PushConsumer of the group and its Listener.
type fifoMember struct {
	l  *grpcv5.Listener
	pc golang.PushConsumer
}

// fifoRan is the seq-th message of message group group, which member ran
// at at.
type fifoRan struct {
	member string
	group  int
	seq    int
	at     time.Time
}

func newFIFORun(t *testing.T) *fifoRun {
	f := newFixture(t, "fifo", 1)
	// The fixture's group is a plain one; this run's is orderly.
	f.group += "-fifo"
	if err := testenv.CreateRocketMQOrderlyGroup(t.Context(), f.ep.NameServer, f.group, 1); err != nil {
		t.Fatal(err)
	}
	testenv.RocketMQ5Topic(t, f.topic, fifoQueues)
	r := &fifoRun{f: f, members: map[string]fifoMember{}}
	p := f.producer()
	ctx, cancel := context.WithCancel(context.Background())
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			g, seq := i%fifoGroups, i/fifoGroups
			m := &golang.Message{Topic: f.topic, Body: fmt.Appendf(nil, "%d %d", g, seq)}
			m.SetMessageGroup(fmt.Sprintf("g%d", g))
			m.AddProperty(msgkey.Property, fmt.Sprintf("%s-%d-%d", f.run, g, seq))
			// A failed send only thins the flow out: the test reads
			// consumption, not delivery.
			p.Send(ctx, m)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-sent
	})
	return r
}

// start starts member name.
func (r *fifoRun) start(name string) {
	f := r.f
	f.t.Helper()
	c := f.consumer()
	l, err := grpcv5.Push(c, func(_ context.Context, m *consumer.Message) error {
		var g, seq int
		if _, err := fmt.Sscanf(string(m.Body), "%d %d", &g, &seq); err != nil {
			return err
		}
		r.mu.Lock()
		r.got = append(r.got, fifoRan{name, g, seq, time.Now()})
		r.mu.Unlock()
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	pc, err := golang.NewPushConsumer(f.config(f.group),
		golang.WithPushMessageListener(l),
		golang.WithPushSubscriptionExpressions(map[string]*golang.FilterExpression{f.topic: golang.SUB_ALL}))
	if err != nil {
		f.t.Fatal(err)
	}
	if err := pc.Start(); err != nil {
		f.t.Fatal(err)
	}
	r.members[name] = fifoMember{l, pc}
	f.t.Cleanup(func() {
		if _, ok := r.members[name]; ok {
			r.stop(name)
		}
	})
}

// stop drains member name.
func (r *fifoRun) stop(name string) {
	m := r.members[name]
	delete(r.members, name)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := m.l.Drain(ctx, m.pc); err != nil {
		r.f.t.Errorf("drain %s: %v", name, err)
	}
}

func (r *fifoRun) snapshot() []fifoRan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// await waits until every message group was run since since, each by one
// of members if any are named, and fails the test after timeout.
func (r *fifoRun) await(since time.Time, timeout time.Duration, members ...string) {
	r.f.t.Helper()
	for {
		seen := map[int]bool{}
		for _, c := range r.snapshot() {
			if !c.at.Before(since) && (len(members) == 0 || slices.Contains(members, c.member)) {
				seen[c.group] = true
			}
		}
		if len(seen) == fifoGroups {
			return
		}
		if time.Since(since) > timeout {
			r.f.t.Fatalf("%v after %v: %d of %d message groups run (by %v)", timeout, since.Format(time.TimeOnly), len(seen), fifoGroups, members)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// gaps returns the longest time a message group went unconsumed between
// from and to, and how long after from joined first ran a message (-1 if
// it ran none).
func (r *fifoRun) gaps(from, to time.Time, joined string) (worst time.Duration, first time.Duration) {
	last := map[int]time.Time{}
	first = -1
	for _, c := range r.snapshot() {
		if c.at.Before(from) || c.at.After(to) {
			continue
		}
		prev, ok := last[c.group]
		if !ok {
			prev = from
		}
		worst = max(worst, c.at.Sub(prev))
		last[c.group] = c.at
		if c.member == joined && first < 0 {
			first = c.at.Sub(from)
		}
	}
	for g := range fifoGroups {
		if t, ok := last[g]; ok {
			worst = max(worst, to.Sub(t))
		} else {
			worst = to.Sub(from)
		}
	}
	return worst, first
}

// inOrder fails the test unless each message ran once, and each message
// group's in the order sent.
func (r *fifoRun) inOrder() {
	r.f.t.Helper()
	ran := map[[2]int]string{}
	next := map[int]int{}
	for _, c := range r.snapshot() {
		id := [2]int{c.group, c.seq}
		if by, ok := ran[id]; ok {
			r.f.t.Errorf("g%d #%d ran twice: by %s, then by %s", c.group, c.seq, by, c.member)
		}
		ran[id] = c.member
		if n, ok := next[c.group]; ok && c.seq < n {
			r.f.t.Errorf("g%d: #%d ran (by %s) after #%d", c.group, c.seq, c.member, n-1)
		}
		next[c.group] = max(next[c.group], c.seq+1)
	}
}

// fifoBound is how long a message group may go unconsumed across a group
// change: far above the fraction of a second it takes (0.2 s seen).
const fifoBound = 4 * time.Second

// fifoWatch is how long after a change the message groups are watched:
// longer than fifoBound, so that a group that stalls is seen to, and than
// a joining consumer takes to run its first message (2.3-3.4 s seen,
// its start included).
const fifoWatch = 8 * time.Second

// TestFIFOGroupChange is TestOrderlyGroupChange of package
// remoting for a 5.x FIFO group (consumeMessageOrderly) of
// PushConsumers and a topic of 8 queues and 8 message groups: b joins a,
// c joins them, c drains, b drains. The proxy assigns every queue to every
// consumer and serialises each queue itself, so no message group waits on
// a rebalance: none goes unconsumed for fifoBound, a joining consumer runs
// messages within fifoWatch, and every message runs once, in its group's
// order.
func TestFIFOGroupChange(t *testing.T) {
	if !inChild(t) {
		return
	}
	r := newFIFORun(t)
	begin := time.Now()
	r.start("a")
	r.await(begin, time.Minute, "a")
	steps := []struct {
		name, joins string
		act         func()
	}{
		{"b joins", "b", func() { r.start("b") }},
		{"c joins", "c", func() { r.start("c") }},
		{"c leaves", "", func() { r.stop("c") }},
		{"b leaves", "", func() { r.stop("b") }},
	}
	for _, s := range steps {
		at := time.Now()
		s.act()
		acted := time.Since(at)
		time.Sleep(fifoWatch)
		worst, first := r.gaps(at, time.Now(), s.joins)
		var b strings.Builder
		fmt.Fprintf(&b, "%s (took %.1fs): longest a message group went unconsumed %.1fs", s.name, acted.Seconds(), worst.Seconds())
		if s.joins != "" {
			fmt.Fprintf(&b, "; %s ran its first message after %.1fs", s.joins, first.Seconds())
		}
		t.Log(racechild.Figure + b.String())
		if worst > fifoBound {
			t.Errorf("%s: a message group went unconsumed %v", s.name, worst)
		}
		if s.joins != "" && first < 0 {
			t.Errorf("%s: %s ran nothing in %v", s.name, s.joins, fifoWatch)
		}
	}
	r.inOrder()
}
