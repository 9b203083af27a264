package remoting_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	rmqproducer "github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/remoting"
)

// roleOrderly is the role of orderlyMember's child processes.
const roleOrderly = "orderly"

// orderlySettings are an orderly child's.
type orderlySettings struct {
	Namesrv, Redis, Topic, Group, Instance, Prefix string
}

// orderlyMember is one orderly push consumer of a group (the role
// roleOrderly) with a Redis store, allocating with HandBack: it says
// "ready" once started and "got Q OFFSET MS" for each message its handler
// runs (its queue id and offset, and this process's clock in Unix
// milliseconds); when its standard input closes it drains and says
// "drained ERR".
func orderlyMember() error {
	var s orderlySettings
	if err := racechild.Settings(&s); err != nil {
		return err
	}
	rdb := redis.NewClient(&redis.Options{Addr: s.Redis})
	defer rdb.Close()
	store, err := redisdedupe.New(rdb, redisdedupe.Config{Prefix: s.Prefix})
	if err != nil {
		return err
	}
	c, err := consumer.New(store, s.Group, consumer.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))))
	if err != nil {
		return err
	}
	ns := primitive.NewPassthroughResolver([]string{s.Namesrv})
	pc, err := rocketmq.NewPushConsumer(
		rmq.WithNsResolver(ns),
		rmq.WithGroupName(s.Group),
		rmq.WithInstance(s.Instance),
		rmq.WithConsumeFromWhere(rmq.ConsumeFromFirstOffset),
		rmq.WithConsumerOrder(true),
		rmq.WithStrategy(remoting.HandBack(ns, rmq.AllocateByAveragely)),
	)
	if err != nil {
		return err
	}
	handle := func(_ context.Context, m *consumer.Message) error {
		ext := m.Raw.(*primitive.MessageExt)
		racechild.Say("got %d %d %d", ext.Queue.QueueId, ext.QueueOffset, time.Now().UnixMilli())
		return nil
	}
	if err := pc.Subscribe(s.Topic, rmq.MessageSelector{}, remoting.Orderly(c, handle)); err != nil {
		return err
	}
	if err := pc.Start(); err != nil {
		return err
	}
	racechild.Say("ready")
	<-racechild.Stopped()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	racechild.Say("drained %v", remoting.Drain(ctx, c, pc))
	return nil
}

// orderlyGroup is a topic of orderlyQueues queues that a producer keeps
// sending to, a message to each queue in turn, and the orderly consumers
// of one group over it, each a child process.
type orderlyGroup struct {
	t       *testing.T
	s       orderlySettings
	members map[string]*racechild.Proc
	// got is every message the members ran, in the order read.
	got []consumed
}

// consumed is a message, at offset of queue, that member ran at at.
type consumed struct {
	member string
	queue  int
	offset int64
	at     time.Time
}

// orderlyQueues is the topic's queue count.
const orderlyQueues = 8

// sendEvery is how often the producer sends: each queue gets a message
// every orderlyQueues*sendEvery.
const sendEvery = 25 * time.Millisecond

func newOrderlyGroup(t *testing.T, b broker) *orderlyGroup {
	run := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	g := &orderlyGroup{t: t, members: map[string]*racechild.Proc{}, s: orderlySettings{
		Namesrv: b.nameServer(t), Redis: testenv.Redis(t),
		Topic: "ord-" + run, Group: "ord-group-" + run, Prefix: "ord:" + run + ":",
	}}
	b.topic(t, g.s.Topic, orderlyQueues)
	b.topic(t, "%RETRY%"+g.s.Group, 1)

	rp, err := rocketmq.NewProducer(producerOptions(g.s.Namesrv, "ord-producer-"+run,
		rmqproducer.WithQueueSelector(rmqproducer.NewRoundRobinQueueSelector()))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := rp.Start(); err != nil {
		t.Fatal(err)
	}
	p, err := remoting.NewProducer(rp, testkit.Keys(t, 5))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		tick := time.NewTicker(sendEvery)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			// A failed send only thins the flow out: the test reads
			// consumption, not delivery.
			p.SendSync(ctx, primitive.NewMessage(g.s.Topic, []byte(strconv.Itoa(i))))
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-sent
		rp.Shutdown()
	})
	return g
}

// start starts member name and waits until it is ready.
func (g *orderlyGroup) start(name string) {
	g.t.Helper()
	s := g.s
	s.Instance = "ord-" + name + "-" + strconv.Itoa(os.Getpid())
	p := racechild.Start(g.t, roleOrderly, name, s)
	g.members[name] = p
	p.Expect(g.t, "ready", time.Minute)
}

// stop drains member name and waits until it exited.
func (g *orderlyGroup) stop(name string) {
	g.t.Helper()
	p := g.members[name]
	p.Stop()
	for _, l := range p.Wait(g.t, time.Minute, racechild.Libraries) {
		g.read(name, l)
	}
	delete(g.members, name)
}

// read notes what member name said in line.
func (g *orderlyGroup) read(name, line string) {
	var (
		q          int
		offset, ms int64
	)
	switch {
	case strings.HasPrefix(line, "got "):
		if _, err := fmt.Sscanf(line, "got %d %d %d", &q, &offset, &ms); err != nil {
			g.t.Fatalf("%s: %q: %v", name, line, err)
		}
		g.got = append(g.got, consumed{name, q, offset, time.UnixMilli(ms)})
	case strings.HasPrefix(line, "drained ") && line != "drained <nil>":
		g.t.Errorf("%s: %s", name, line)
	}
}

// owners returns the queues each of members is given: the client's
// default allocation, over client ids that sort as the members' names do
// (one host, instance names "ord-<name>-<pid>").
func owners(members ...string) map[int]string {
	mqs := make([]*primitive.MessageQueue, orderlyQueues)
	for q := range mqs {
		mqs[q] = &primitive.MessageQueue{QueueId: q}
	}
	members = slices.Sorted(slices.Values(members))
	owner := map[int]string{}
	for _, m := range members {
		for _, mq := range rmq.AllocateByAveragely("", m, mqs, members) {
			owner[mq.QueueId] = m
		}
	}
	return owner
}

// settle waits until every queue was run by its owner among members.
func (g *orderlyGroup) settle(members ...string) {
	g.t.Helper()
	since := time.Now()
	g.await(since, owners(members...), 2*time.Minute)
}

// change runs act, which changes the group from members before to members
// after, and returns how long after it each queue that changed hands was
// first run by its new owner. It fails the test unless all were within
// bound.
func (g *orderlyGroup) change(before, after []string, act func(), bound time.Duration) map[int]time.Duration {
	g.t.Helper()
	was, now := owners(before...), owners(after...)
	moved := map[int]string{}
	for q, m := range now {
		if was[q] != m {
			moved[q] = m
		}
	}
	at := time.Now()
	act()
	return g.await(at, moved, bound)
}

// await waits until each queue of want was run by its member since
// since, and returns how long after since each first was. It fails the
// test after timeout.
func (g *orderlyGroup) await(since time.Time, want map[int]string, timeout time.Duration) map[int]time.Duration {
	g.t.Helper()
	deadline := since.Add(timeout)
	for {
		first := map[int]time.Duration{}
		for _, c := range g.got {
			if _, ok := first[c.queue]; !ok && want[c.queue] == c.member && !c.at.Before(since) {
				first[c.queue] = c.at.Sub(since)
			}
		}
		if len(first) == len(want) {
			return first
		}
		if time.Now().After(deadline) {
			var late []string
			for q, m := range want {
				if _, ok := first[q]; !ok {
					late = append(late, fmt.Sprintf("q%d by %s", q, m))
				}
			}
			slices.Sort(late)
			g.t.Fatalf("%v after the change, not yet run: %s", timeout, strings.Join(late, ", "))
		}
		idle := true
		for name, p := range g.members {
			for l, ok := p.Said(); ok; l, ok = p.Said() {
				idle = false
				g.read(name, l)
			}
		}
		if idle {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// inOrder fails the test unless each message was run once, and each
// queue's in the order of their offsets (by the members' clocks, to the
// millisecond).
func (g *orderlyGroup) inOrder() {
	g.t.Helper()
	ran := map[[2]int64]string{}
	last := map[int]consumed{}
	for _, c := range slices.SortedStableFunc(slices.Values(g.got), func(a, b consumed) int { return a.at.Compare(b.at) }) {
		id := [2]int64{int64(c.queue), c.offset}
		if by, ok := ran[id]; ok {
			g.t.Errorf("q%d offset %d ran twice: by %s, then by %s", c.queue, c.offset, by, c.member)
		}
		ran[id] = c.member
		if l, ok := last[c.queue]; ok && l.offset > c.offset && l.at.Before(c.at) {
			g.t.Errorf("q%d: offset %d ran (by %s) after offset %d (by %s)", c.queue, c.offset, c.member, l.offset, l.member)
		}
		last[c.queue] = c
	}
}

// delays formats the delays of moved queues.
func delays(d map[int]time.Duration) string {
	var b strings.Builder
	for _, q := range slices.Sorted(maps.Keys(d)) {
		fmt.Fprintf(&b, "q%d=%.1fs ", q, d[q].Seconds())
	}
	return strings.TrimSpace(b.String())
}

// handOverBound is how soon a queue that changes hands must be consumed
// by its new owner: well above the few seconds it takes (the client's
// first pull of a queue it locked waits 3 s), far below the broker's 60 s
// lock expiry.
const handOverBound = 20 * time.Second

// TestOrderlyGroupChange changes an orderly group of consumers, each a
// child process allocating with HandBack, over a topic of 8 queues to
// which messages keep coming: b joins a, c joins them, c drains, b drains.
// Every queue that changes hands is consumed by its new owner within
// handOverBound, and every message runs once, in its queue's order.
// Without HandBack the queues that a rebalance takes from a consumer that
// stays (4-7 from a when b joins; 3 from a and 6-7 from b when c joins; 3
// from b when c leaves) waited 60-73 s for the broker's lock to expire;
// those of a consumer that leaves, which unlocks them, took 3 s as now.
func TestOrderlyGroupChange(t *testing.T) {
	// In parallel with the package's other long tests, and per broker: a
	// group of its own spends most of its time waiting for rebalances.
	t.Parallel()
	for _, b := range []broker{broker4, broker5} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			if !inChild(t, b) {
				return
			}
			g := newOrderlyGroup(t, b)
			g.start("a")
			g.settle("a")
			steps := []struct {
				name          string
				before, after []string
				act           func()
			}{
				{"b joins", []string{"a"}, []string{"a", "b"}, func() { g.start("b") }},
				{"c joins", []string{"a", "b"}, []string{"a", "b", "c"}, func() { g.start("c") }},
				{"c leaves", []string{"a", "b", "c"}, []string{"a", "b"}, func() { g.stop("c") }},
				{"b leaves", []string{"a", "b"}, []string{"a"}, func() { g.stop("b") }},
			}
			for _, s := range steps {
				d := g.change(s.before, s.after, s.act, handOverBound)
				t.Logf(racechild.Figure+"%s: moved queues first run by their new owner after %s", s.name, delays(d))
				g.settle(s.after...)
			}
			g.inOrder()
		})
	}
}
