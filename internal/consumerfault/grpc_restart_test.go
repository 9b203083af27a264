package consumerfault

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testenv"
)

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
	check(t, grpcRollingRestart(t))
}

// grpcRollingRestart runs TestGRPCRollingRestart's scenario.
func grpcRollingRestart(t *testing.T) tally {
	const (
		total    = 800
		sendFor  = 10 * time.Second
		workers  = 3
		lease    = 3 * time.Second
		handling = 50 * time.Millisecond
	)
	begin := time.Now()
	ep := testenv.RocketMQ5(t)
	f := fixtureOn(t, "grpc-roll", ep.NameServer, testenv.RocketMQ5Topic)
	topic, group := f.topic(8), f.group()
	testenv.RocketMQGroup(t, ep.NameServer, group, 1)
	dlq := f.watchDLQ(group)
	p := f.producer()

	s := settings{
		Namesrv: ep.NameServer, Proxy: ep.Proxy, Redis: f.redisAddr, Topic: topic, Group: group,
		Prefix: f.storePrefix(), Ledger: f.ledger(), Lease: lease, Work: handling,
	}
	started := 0
	spawn := func() *racechild.Proc {
		started++
		s.Instance = fmt.Sprintf("cf-grpc-worker-%s-%d", f.run, started)
		return racechild.Start(t, roleGRPCWorker, fmt.Sprintf("gRPC worker %d", started), s)
	}
	var kids [workers]*racechild.Proc
	for i := range kids {
		kids[i] = spawn()
	}
	for _, w := range kids {
		w.Expect(t, "ready", 60*time.Second)
	}
	ready := time.Since(begin)

	sendStart := time.Now()
	sending := sendPaced(t.Context(), p, topic, total, sendFor)

	var restarts, drainErrs []string
	var termAt []time.Duration // of the restarts, after the first send
	// landed counts the restarts whose SIGTERM landed while a handler was
	// past its effect: the case a drain is for.
	landed := 0
	// lastExit is when the last process restarted mid-run exited: a
	// message it left in hand comes back an invisible duration later.
	var lastExit time.Time
	// stopped waits for w, sent SIGTERM, to exit, and returns what it said
	// on the way out.
	stopped := func(w *racechild.Proc) string {
		t.Helper()
		term, line, errs := stopWorker(t, w, drainBound+20*time.Second, racechild.Libraries)
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
		kids[i].Expect(t, "ready", 60*time.Second)
	}
	sent, err := sending()
	if err != nil {
		t.Fatal(err)
	}
	if landed == 0 {
		t.Errorf("no SIGTERM landed while a handler was past its effect: this run proved nothing")
	}
	sendTook := time.Since(sendStart)
	// Settled once every key is applied or dead-lettered and whatever the
	// restarted processes left in hand has come back (the invisible
	// duration, and 2 s for the broker's revive), so that a late duplicate
	// or dead letter shows.
	back := lastExit.Add(grpcInvisible + 2*time.Second)
	tl := f.settle(sent, dlq, func() bool { return time.Now().After(back) }, 60*time.Second, 500*time.Millisecond)
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
	if len(drainErrs) > 0 {
		t.Errorf("%d drains ran out of their %v bound:\n%s", len(drainErrs), drainBound, strings.Join(drainErrs, "\n"))
	}
	return tl
}
