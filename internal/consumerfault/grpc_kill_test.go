package consumerfault

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testenv"
)

// TestGRPCKilledHolder is TestBusyKeyNeverSpendsLastRetry for the 5.x
// gRPC client: a SimpleConsumer process (grpcv5.Simple) holds every
// message of a run — keys claimed, leases renewed, messages kept invisible,
// effects not applied — and is killed with SIGKILL; a second process of the
// same group takes the messages over while the dead holder's leases still
// run. The group allows one retry (retryMaxTimes 1), and the holder's death
// spends it: a 5.x receipt cannot be handed back unspent, so every message
// comes back on its second and last attempt once its invisible duration
// (10 s) ends, and finds its key busy. Handed back for that, it would be
// dead-lettered; the taker keeps it in hand, invisible, until the lease
// ends, then applies it.
//
// It counts exactly: keys lost (never applied), dead-lettered, applied
// twice. All must be 0; and the taker must have waited for busy keys on
// their last attempt, or the run proved nothing.
func TestGRPCKilledHolder(t *testing.T) {
	if !inChild(t, rocketmq5(t)...) {
		return
	}
	const (
		n = 12
		// A lease that outlives the messages' invisibility after the kill:
		// renewed every 8 s, at least 16 s of it are left then, and the
		// messages come back within 10 s and a revive.
		lease = 24 * time.Second
	)
	begin := time.Now()
	ep := testenv.RocketMQ5(t)
	f := fixtureOn(t, "grpc-kill", ep.NameServer, testenv.RocketMQ5Topic)
	topic, group := f.topic(2), f.group()
	testenv.RocketMQGroup(t, ep.NameServer, group, 1)
	dlq := f.watchDLQ(group)
	p := f.producer()
	sent := sendAll(t, p, topic, n, func(i int) []byte { return fmt.Appendf(nil, "order %d", i) })

	s := settings{
		Namesrv: ep.NameServer, Proxy: ep.Proxy, Redis: f.redisAddr, Topic: topic, Group: group,
		Prefix: f.storePrefix(), Ledger: f.ledger(), Lease: lease,
	}
	s.Instance = "cf-grpc-holder-" + f.run
	holder := racechild.Start(t, roleGRPCHolder, "gRPC holder", s)
	held := awaitHeld(t, holder, n, 60*time.Second)
	heldAll := time.Since(begin)
	holder.Kill(t)
	killed := holder.Signalled

	s.Instance = "cf-grpc-taker-" + f.run
	taker := racechild.Start(t, roleGRPCTaker, "gRPC taker", s)
	taker.Expect(t, "ready", 60*time.Second)
	tl := f.settle(sent, dlq, nil, 60*time.Second, 2*time.Second)
	taker.Stop()
	said := taker.Wait(t, 60*time.Second, racechild.Libraries)

	var (
		stats    string
		first    time.Duration // from the kill to the taker's first delivery
		attempts = map[int32]int{}
	)
	for _, l := range said {
		var key string
		var attempt int32
		var at int64
		switch {
		case strings.HasPrefix(l, "stats "):
			stats = l
		case strings.HasPrefix(l, "recv "):
			if _, err := fmt.Sscanf(l, "recv %s %d %d", &key, &attempt, &at); err != nil {
				t.Fatalf("taker said %q: %v", l, err)
			}
			attempts[attempt]++
			if d := time.UnixMilli(at).Sub(killed); first == 0 || d < first {
				first = d
			}
		}
	}
	t.Logf(racechild.Figure+"%v; holder held %d keys on attempts %v after %v; taker's first delivery %v after the kill, attempts %v, %s; %v in all",
		tl, len(held), attemptCounts(held), heldAll.Round(100*time.Millisecond), first.Round(100*time.Millisecond), attempts, stats,
		time.Since(begin).Round(100*time.Millisecond))
	tl.Check(t)
	if attempts[2] == 0 || !strings.Contains(stats, "waited=") || strings.Contains(stats, "waited=0 ") {
		t.Errorf("the taker waited for no busy key on a last attempt (%v, %s): this run proved nothing", attempts, stats)
	}
	for a, c := range attempts {
		if a > 2 {
			t.Errorf("%d deliveries on attempt %d: past the group's last", c, a)
		}
	}
}

// attemptCounts counts held keys per attempt.
func attemptCounts(held map[string]int) map[int]int {
	out := map[int]int{}
	for _, a := range held {
		out[a]++
	}
	return out
}
