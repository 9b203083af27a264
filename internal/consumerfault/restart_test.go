package consumerfault

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemq/idemq/internal/racechild"
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
	check(t, rollingRestart(t))
}

// rollingRestart runs TestRollingRestart's scenario.
func rollingRestart(t *testing.T) tally {
	const (
		total    = 1500
		sendFor  = 10 * time.Second
		workers  = 3
		lease    = 3 * time.Second
		handling = 50 * time.Millisecond
	)
	begin := time.Now()
	f := newFixture(t, "roll")
	topic, group := f.topic(8), f.group()
	dlq := f.watchDLQ(group)
	p := f.producer()

	s := settings{
		Namesrv: f.ns, Redis: f.redisAddr, Topic: topic, Group: group,
		Prefix: f.storePrefix(), Ledger: f.ledger(), Lease: lease, Work: handling,
	}
	started := 0
	spawn := func() *racechild.Proc {
		started++
		s.Instance = fmt.Sprintf("cf-worker-%s-%d", f.run, started)
		return racechild.Start(t, roleWorker, fmt.Sprintf("worker %d", started), s)
	}
	var kids [workers]*racechild.Proc
	for i := range kids {
		kids[i] = spawn()
	}
	for _, w := range kids {
		w.Expect(t, "ready", 30*time.Second)
	}

	sendStart := time.Now()
	sending := sendPaced(t.Context(), p, topic, total, sendFor)

	var restarts, drainErrs []string
	// stopped waits for w, sent SIGTERM, to exit, and returns what it said
	// on the way out.
	stopped := func(w *racechild.Proc) string {
		t.Helper()
		// The client's Shutdown, which Drain calls too, races inside the
		// client: it sets its closed flag unsynchronised while a rebalance
		// reads it, and closes a queue's channel while its pull loop sends
		// on it. Races wholly inside it are tolerated; any touching our
		// code fails the test.
		_, line, errs := stopWorker(t, w, drainBound+10*time.Second, []string{"github.com/apache/rocketmq-client-go/v2"})
		drainErrs = append(drainErrs, errs...)
		return line
	}
	for i := range kids {
		time.Sleep(time.Until(sendStart.Add(time.Duration(i+1) * sendFor / (workers + 1))))
		kids[i].Signal(t, syscall.SIGTERM)
		restarts = append(restarts, stopped(kids[i]))
		kids[i] = spawn()
		kids[i].Expect(t, "ready", 30*time.Second)
	}
	sent, err := sending()
	if err != nil {
		t.Fatal(err)
	}
	tl := f.settle(sent, dlq, nil, 60*time.Second, 1500*time.Millisecond)
	for _, w := range kids {
		w.Signal(t, syscall.SIGTERM)
	}
	for _, w := range kids {
		restarts = append(restarts, stopped(w))
	}
	t.Logf(racechild.Figure+"drain: %v; %v in all", tl, time.Since(begin).Round(100*time.Millisecond))
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
