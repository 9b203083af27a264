package consumerfault

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemq/idemq/internal/racechild"
)

// TestKilledWorker kills (SIGKILL) a consumer process mid-stream, while
// its handlers apply effects at full speed, and starts a replacement of
// the same group, while a producer sends 2,000 messages over 4 s. Handlers
// take 5 ms and apply their effect after 1 ms.
//
// The dead process's acknowledged messages whose offsets it had not
// persisted come again: those recorded done are suppressed; those whose
// effect ran and whose record had not reached the store run again —
// doubled. Those are the handlers past their effect at the kill (at most
// the client's 20 consume goroutines) and the completions the guard had
// deferred (at most 64, see dedupe.GuardConfig.LateFailure): the
// documented bound. Nothing may be lost or dead-lettered, and no key
// applied more than twice. The test logs how many doubled.
func TestKilledWorker(t *testing.T) {
	if !inChild(t, rocketmq4(t)...) {
		return
	}
	const (
		total     = 2000
		sendFor   = 4 * time.Second
		lease     = 3 * time.Second
		handling  = 5 * time.Millisecond
		consumers = 20 // the push consumer's default ConsumeGoroutineNums
		deferred  = 64 // the guard's deferred completions at most
	)
	f := newFixture(t, "kill")
	topic, group := f.topic(8), f.group()
	dlq := f.watchDLQ(group)
	p := f.producer()
	s := settings{
		Namesrv: f.ns, Redis: f.redisAddr, Topic: topic, Group: group,
		Prefix: f.storePrefix(), Ledger: f.ledger(), Lease: lease, Work: handling,
	}
	spawn := func(n int) *racechild.Proc {
		s.Instance = fmt.Sprintf("cf-kill-%s-%d", f.run, n)
		w := racechild.Start(t, roleWorker, fmt.Sprintf("worker %d", n), s)
		w.Expect(t, "ready", 30*time.Second)
		return w
	}
	victim := spawn(1)
	sendStart := time.Now()
	sending := sendPaced(t.Context(), p, topic, total, sendFor)
	time.Sleep(sendFor / 2)
	victim.Kill(t)
	killedAt := victim.Signalled.Sub(sendStart).Round(10 * time.Millisecond)
	heir := spawn(2)
	sent, err := sending()
	if err != nil {
		t.Fatal(err)
	}
	tl := f.settle(sent, dlq, nil, 60*time.Second, 1500*time.Millisecond)
	heir.Stop()
	heir.Wait(t, drainBound+10*time.Second, []string{"github.com/apache/rocketmq-client-go/v2"})
	t.Logf(racechild.Figure+"kill -9: %v; killed %v after the first send; doubled %d (bound %d)", tl, killedAt, len(tl.Doubled), consumers+deferred)
	if len(tl.Lost)+len(tl.Dead)+len(tl.Extra) > 0 {
		t.Errorf("lost %v, dead-lettered %v, unknown %v; want none", tl.Lost, tl.Dead, tl.Extra)
	}
	if len(tl.Doubled) > consumers+deferred {
		t.Errorf("doubled %d, beyond the bound of %d handlers running and %d completions deferred: %v", len(tl.Doubled), consumers, deferred, tl.Doubled)
	}
	for _, d := range tl.Doubled {
		if _, n, _ := strings.Cut(d, "×"); n != "2" {
			t.Errorf("%s: applied more than twice", d)
		}
	}
}
