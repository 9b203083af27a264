package consumerfault

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/remoting"
)

// TestRollingRestart restarts a group of three consumer processes one after
// the other — SIGTERM, wait for the exit, start a replacement — while a
// producer sends 1,500 messages. Handlers take 50 ms and apply their effect
// after 10 ms; each SIGTERM lands while one has applied its effect and not
// yet returned, so that its key is not recorded done yet.
//
// On SIGTERM a consumer calls remoting.Drain with a bound, then exits.
// Every key must be applied exactly once: 0 lost, 0 doubled, nothing
// dead-lettered; and no drain may run out of its bound.
func TestRollingRestart(t *testing.T) {
	if !inChild(t, rocketmq4(t)...) {
		return
	}
	rollingRestart(t, restartFamily{
		total:  1500,
		worker: "worker",
		role:   roleWorker,
		open: func(t *testing.T) (*fixture, string) {
			return newFixture(t, "roll"), ""
		},
		ready: 30 * time.Second,
		slack: 10 * time.Second,
		// The client's Shutdown, which Drain calls too, races inside the
		// client: it sets its closed flag unsynchronised while a rebalance
		// reads it, and closes a queue's channel while its pull loop sends
		// on it. Races wholly inside it are tolerated; any touching our
		// code fails the test.
		libraries: []string{"github.com/apache/rocketmq-client-go/v2"},
		quiet:     1500 * time.Millisecond,
	}).Check(t)
}

// TestGRPCRollingRestart is TestRollingRestart for the 5.x gRPC client:
// three processes, each receiving with grpcv5.Simple, are restarted
// one after the other — SIGTERM, wait for the exit, start a replacement —
// while a producer sends 800 messages over 10 s. Handlers take 50 ms and
// apply their effect after 10 ms; each SIGTERM lands while one has applied
// its effect and not yet returned.
//
// On SIGTERM a process closes its Receiver, which stops receiving (the
// Receive under way finishes and its messages are handled) and waits for
// the messages in hand, then stops its SimpleConsumer and exits. Every key
// must be applied exactly once: 0 lost, 0 doubled, nothing dead-lettered;
// no drain may run out of its bound; and a SIGTERM must have landed past
// an effect, or the run proved nothing. A drain waits for the Receive
// under way rather than cancel it (its messages would be spent): mid-run,
// while messages flow, that is milliseconds; an idle process waits for its
// long poll to end, which the proxy holds open for about the request's
// deadline less a margin (awaitDuration 5 s plus these clients' 10 s
// request timeout, from WithQueryRouteTimeout): up to ~10 s. The log gives
// each drain.
//
// The group allows one retry (retryMaxTimes 1). A 5.x receipt cannot be
// handed back unspent, so every message a process received and did not
// acknowledge comes back on its next attempt once its invisible duration
// (10 s) ends; with retryMaxTimes 0 there is no next attempt, and it would
// be dead-lettered instead, never applied if its handler had not got that
// far. A drain acknowledges all it received and spends no attempt; should
// it spend one anyway — a Receive whose answer the client gave up on, an
// acknowledgement that failed, a drain out of time — the message comes
// back once, on attempt 2, and finds its key done (suppressed) or free
// (applied): one retry is the fewest that never dead-letters for it. The
// restarts fall 2.5, 5 and 7.5 s after the first send, within one
// invisible duration of it, so a message one of them left in hand comes
// back after the last: none meets two restarts. More retries would hide a
// message spent twice, which the test should see; the workers count
// deliveries per attempt, and the test logs them with the restarts'
// times.
func TestGRPCRollingRestart(t *testing.T) {
	if !inChild(t, rocketmq5(t)...) {
		return
	}
	rollingRestart(t, restartFamily{
		total:  800,
		worker: "gRPC worker",
		role:   roleGRPCWorker,
		open: func(t *testing.T) (*fixture, string) {
			ep := testenv.RocketMQ5(t)
			return fixtureOn(t, "grpc-roll", ep.NameServer, testenv.RocketMQ5Topic), ep.Proxy
		},
		retries:   1,
		ready:     60 * time.Second,
		slack:     20 * time.Second,
		libraries: racechild.Libraries,
		mustLand:  true,
		comeBack:  grpcInvisible + 2*time.Second,
		quiet:     500 * time.Millisecond,
	}).Check(t)
}

// restartFamily is what the rolling-restart scenario takes from a client
// family.
type restartFamily struct {
	total  int    // messages to send, over 10 s
	worker string // a worker process's name, before its number
	role   string // the worker processes' racechild role
	// open is the scenario's fixture, and the proxy's address ("" for
	// none).
	open func(t *testing.T) (*fixture, string)
	// retries, when above 0, is set as the group's retryMaxTimes.
	retries int
	// ready bounds a worker's start; slack is added to drainBound for a
	// worker's exit after SIGTERM.
	ready, slack time.Duration
	// libraries are those whose own races a worker's exit tolerates.
	libraries []string
	// mustLand fails a run in which no SIGTERM landed while a handler was
	// past its effect.
	mustLand bool
	// comeBack, when above 0, is how long after the last mid-run exit
	// what it left in hand comes back: the run is not settled before.
	comeBack time.Duration
	// quiet is how long the ledger and dead letters must stay still for
	// the run to be settled.
	quiet time.Duration
}

// rollingRestart runs the rolling-restart scenario for fam.
func rollingRestart(t *testing.T, fam restartFamily) testkit.Tally {
	const (
		sendFor  = 10 * time.Second
		workers  = 3
		lease    = 3 * time.Second
		handling = 50 * time.Millisecond
	)
	begin := time.Now()
	f, proxy := fam.open(t)
	topic, group := f.topic(8), f.group()
	if fam.retries > 0 {
		testenv.RocketMQGroup(t, f.ns, group, fam.retries)
	}
	dlq := f.watchDLQ(group)
	p := f.producer()

	s := settings{
		Namesrv: f.ns, Proxy: proxy, Redis: f.redisAddr, Topic: topic, Group: group,
		Prefix: f.storePrefix(), Ledger: f.ledger(), Lease: lease, Work: handling,
	}
	started := 0
	spawn := func() *racechild.Proc {
		started++
		s.Instance = fmt.Sprintf("cf-%s-%s-%d", strings.ReplaceAll(strings.ToLower(fam.worker), " ", "-"), f.run, started)
		return racechild.Start(t, fam.role, fmt.Sprintf("%s %d", fam.worker, started), s)
	}
	var kids [workers]*racechild.Proc
	for i := range kids {
		kids[i] = spawn()
	}
	for _, w := range kids {
		w.Expect(t, "ready", fam.ready)
	}
	ready := time.Since(begin)

	sendStart := time.Now()
	sending := sendPaced(t.Context(), p, topic, fam.total, sendFor)

	var restarts, drainErrs []string
	var termAt []time.Duration // of the restarts, after the first send
	// landed counts the restarts whose SIGTERM landed while a handler was
	// past its effect: the case a drain is for.
	landed := 0
	// lastExit is when the last process restarted mid-run exited: a
	// message it left in hand comes back fam.comeBack later.
	var lastExit time.Time
	// stopped waits for w, sent SIGTERM, to exit, and returns what it said
	// on the way out.
	stopped := func(w *racechild.Proc) string {
		t.Helper()
		term, line, errs := stopWorker(t, w, drainBound+fam.slack, fam.libraries)
		if !strings.HasSuffix(term, " past-effect=0") {
			landed++
		}
		drainErrs = append(drainErrs, errs...)
		return line
	}
	for i := range kids {
		time.Sleep(time.Until(sendStart.Add(time.Duration(i+1) * sendFor / (workers + 1))))
		kids[i].Signal(t, syscall.SIGTERM)
		termAt = append(termAt, kids[i].Signalled.Sub(sendStart).Round(100*time.Millisecond))
		restarts = append(restarts, stopped(kids[i]))
		lastExit = kids[i].Exited
		kids[i] = spawn()
		kids[i].Expect(t, "ready", fam.ready)
	}
	sent, err := sending()
	if err != nil {
		t.Fatal(err)
	}
	if fam.mustLand && landed == 0 {
		t.Errorf("no SIGTERM landed while a handler was past its effect: this run proved nothing")
	}
	sendTook := time.Since(sendStart)
	// Settled once every key is applied or dead-lettered and, where
	// fam.comeBack says, whatever the restarted processes left in hand has
	// come back, so that a late duplicate or dead letter shows.
	var idle func() bool
	if fam.comeBack > 0 {
		back := lastExit.Add(fam.comeBack)
		idle = func() bool { return time.Now().After(back) }
	}
	tl := f.settle(sent, dlq, idle, 60*time.Second, fam.quiet)
	settled := time.Since(sendStart)
	for _, w := range kids {
		w.Signal(t, syscall.SIGTERM)
	}
	for _, w := range kids {
		restarts = append(restarts, stopped(w))
	}
	t.Logf(racechild.Figure+"drain: %v; ready %v, sent in %v, restarts at %v and settled %v after the first send, %v in all", tl,
		ready.Round(100*time.Millisecond), sendTook.Round(100*time.Millisecond), termAt, settled.Round(100*time.Millisecond),
		time.Since(begin).Round(100*time.Millisecond))
	for _, r := range restarts {
		t.Log(racechild.Figure + r)
	}
	// Handlers take 50 ms: a drain that runs out of its bound waited for
	// something else, such as a callback that waits for a busy key (before
	// 0a4b617, a held callback still counted as running, and Drain waited
	// for it until its context ended).
	if len(drainErrs) > 0 {
		t.Errorf("%d drains ran out of their %v bound:\n%s", len(drainErrs), drainBound, strings.Join(drainErrs, "\n"))
	}
	return tl
}

// sendPaced sends total messages to topic through p, evenly over sendFor,
// in the background. The function it returns waits for the last send and
// returns the keys sent, or the first send's error.
func sendPaced(ctx context.Context, p *remoting.Producer, topic string, total int, sendFor time.Duration) func() ([]string, error) {
	done := make(chan struct{})
	var (
		sent []string
		err  error
	)
	go func() {
		defer close(done)
		tick := time.NewTicker(sendFor / time.Duration(total))
		defer tick.Stop()
		for i := range total {
			<-tick.C
			key, serr := send(ctx, p, topic, fmt.Appendf(nil, "order %d", i))
			if serr != nil {
				err = fmt.Errorf("send %d: %w", i, serr)
				return
			}
			sent = append(sent, key)
		}
	}()
	return func() ([]string, error) {
		<-done
		return sent, err
	}
}

// stopWorker waits for the worker w, sent SIGTERM, to say "term …" and to
// exit within bound, and checks its exit by racechild's rule, tolerating
// races wholly inside libraries. It returns the term line, a line for the
// test's log, and the drain errors w said, each led by its name.
func stopWorker(t *testing.T, w *racechild.Proc, bound time.Duration, libraries []string) (term, line string, drainErrs []string) {
	t.Helper()
	term = w.Expect(t, "term ", 10*time.Second)
	rest := w.Wait(t, bound, libraries)
	var said []string
	for _, l := range rest {
		if e, ok := strings.CutPrefix(l, "drain-error "); ok {
			drainErrs = append(drainErrs, w.Name()+": "+e)
		} else {
			said = append(said, l)
		}
	}
	line = fmt.Sprintf("%s: exited %v after SIGTERM; at SIGTERM handlers %s; %s", w.Name(),
		w.Exited.Sub(w.Signalled).Round(time.Millisecond), term, strings.Join(said, " "))
	return term, line, drainErrs
}
