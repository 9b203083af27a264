package brokerfault

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/relaychild"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/outbox"
)

// TestChainUnderFaults runs the chain A → B → C of docs/exactly-once.md on a
// private two-broker cluster, each service with a MariaDB database of its
// own, and kills its parts while orders flow, each in a process of its own
// so that kill -9 is real:
//
//   - A writes 600 orders over 10 s, each with Outbox.Add in a transaction
//     of its own; a relay process ships them.
//   - B, a consumer process, consumes the orders in the transactional mode
//     and, per order, writes a row and emits a payment with Outbox.Emit in
//     the same transaction; a relay process ships B's outbox.
//   - C, a consumer process, applies each payment in the transactional mode
//     too, so that exactly once is each hop's property whatever process
//     dies (with Redis an effect and its record commit apart): its effect,
//     a row, commits with the record of its key, and a payment C applied
//     twice would show as two rows.
//
// The faults: one broker is killed with SIGKILL once C applied a fifth of
// the orders, and started again on its store at once; A's relay is killed
// holding its 240th send, which the broker stored and the relay did not
// mark (its replacement ships the row again after the lease, with its key),
// and B's likewise at its 360th; B's consumer is killed in its 300th
// handler run, its row written and its payment emitted in the open
// transaction. Each killed process is replaced.
//
// Every order must be applied once at B and its payment once at C: 0 lost,
// 0 doubled; B's outbox holds one payment per order. Every copy the broker
// delivered to B carries its order's key as A stamped it, and every copy
// delivered to C the key derived from it (msgkey.Derive). The test waits
// for both groups' backlogs to reach 0 before it counts, so that no copy
// stored on the brokers is left undelivered.
//
// In 8 runs (-race, two cores shared with other test runs), 35-58 s each,
// cluster start included: nothing lost or doubled, and every copy carried
// its message's key. The broker delivered 61-101 duplicates to B, 1-24 of
// them orders stored twice (the held send shipped again, and the client's
// own retries over the broker's kill), the rest copies redelivered to B's
// replacement consumer from offsets the killed one had not committed: it
// suppressed the 60-94 orders the killed one had committed and applied the
// 1-10 it had not. It delivered 2-32 duplicates to C, every one a payment
// stored twice. The broker registered 2-7 s after its kill; the messages
// stranded on it (0-21 a run) reached their consumer up to 31 s after that
// (a client subscribes again to a restarted broker at its next heartbeat,
// every 30 s), and the test's wait for the groups' backlogs covers them.
func TestChainUnderFaults(t *testing.T) {
	if !racechild.Test(t, "IDEMQ_MYSQL_DSN="+testenv.MySQL(t)) {
		return
	}
	const (
		orders   = 600
		sendFor  = 10 * time.Second
		queues   = 4 // per broker, of each topic
		lease    = 3 * time.Second
		settleIn = 2 * time.Minute
		victim   = 0 // the broker killed
	)
	begin := time.Now()
	ctx := t.Context()
	mq := startCluster(t, 2)
	ns := mq.NameServer()
	run := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	ordersTopic, paymentsTopic := "chain-orders-"+run, "chain-payments-"+run
	groupB, groupC := "chain-b-"+run, "chain-c-"+run
	for _, tq := range []struct {
		topic  string
		queues int
	}{{ordersTopic, queues}, {paymentsTopic, queues}, {"%RETRY%" + groupB, 1}, {"%RETRY%" + groupC, 1}} {
		if err := mq.CreateTopic(ctx, tq.topic, tq.queues); err != nil {
			t.Fatal(err)
		}
	}

	// The databases: A's outbox; B's outbox, records and effects; C's
	// records and effects.
	dsnA, dsnB, dsnC := testdb.MySQL.DSN(t), testdb.MySQL.DSN(t), testdb.MySQL.DSN(t)
	dbA, dbB, dbC := testdb.MySQL.OpenDSN(t, dsnA), testdb.MySQL.OpenDSN(t, dsnB), testdb.MySQL.OpenDSN(t, dsnC)
	outA := migratedOutbox(t, dbA, 1)
	outB := migratedOutbox(t, dbB, 0)
	for _, db := range []*sql.DB{dbB, dbC} {
		migrateService(t, db)
	}

	relay := func(name, dsn string, midway int64) *racechild.Proc {
		p := racechild.Start(t, relaychild.Role, name, relaychild.Settings{
			Namesrv: ns, Backend: testdb.MySQL.Name, DSN: dsn, Name: "chain-" + name + "-" + run,
			Lease: lease, Midway: midway, Hold: midway > 0, SendTimeout: 3 * time.Second,
		})
		p.Expect(t, "started", time.Minute)
		return p
	}
	service := func(name, dsn, topic, group, emitTo string, holdAt int64) *chainProc {
		instance := "chain-" + name + "-" + run
		p := &chainProc{instance: instance, Proc: racechild.Start(t, roleChain, name, chainSettings{
			Namesrv: ns, DSN: dsn, Topic: topic, Group: group, Instance: instance, EmitTo: emitTo, HoldAt: holdAt,
		})}
		p.await(t, "ready", time.Minute)
		return p
	}
	relayA := relay("relay-a1", dsnA, orders*2/5)
	relayB := relay("relay-b1", dsnB, orders*3/5)
	b1 := service("b1", dsnB, ordersTopic, groupB, paymentsTopic, orders/2)
	c := service("c", dsnC, paymentsTopic, groupC, "", 0)

	// A writes the orders, paced over sendFor.
	keys := make([]string, orders)
	written := make(chan error, 1)
	writeBegin := time.Now()
	go func() {
		for i := range orders {
			time.Sleep(time.Until(writeBegin.Add(time.Duration(i) * sendFor / orders)))
			k, err := addOrder(ctx, dbA, outA, ordersTopic, i)
			if err != nil {
				written <- fmt.Errorf("order %d: %w", i, err)
				return
			}
			keys[i] = k
		}
		written <- nil
	}()
	since := func(at time.Time) time.Duration { return at.Sub(writeBegin).Round(10 * time.Millisecond) }

	// The broker: killed once C applied a fifth of the orders, and started
	// again at once, on its store.
	waitRows(t, dbC, orders/5)
	brokerKilled := time.Now()
	if err := mq.KillBroker(victim); err != nil {
		t.Fatal(err)
	}
	restarted := make(chan error, 1)
	var registered time.Time
	go func() {
		err := mq.RestartBroker(ctx, victim)
		registered = time.Now()
		restarted <- err
	}()

	// A's relay: killed holding a send, stored and not marked.
	relayA.Expect(t, "midway", time.Minute)
	relayA.Kill(t)
	relayAKilled := relayA.Signalled
	relayA = relay("relay-a2", dsnA, 0)

	// B's consumer: killed in its 300th handler run, which wrote its row
	// and emitted its payment in its transaction, not committed.
	held := b1.await(t, "holding ", time.Minute)
	b1.Kill(t)
	b1.drain()
	b2 := service("b2", dsnB, ordersTopic, groupB, paymentsTopic, 0)

	// B's relay: as A's.
	relayB.Expect(t, "midway", time.Minute)
	relayB.Kill(t)
	relayBKilled := relayB.Signalled
	relayB = relay("relay-b2", dsnB, 0)

	if err := <-written; err != nil {
		t.Fatal(err)
	}
	writeEnd := time.Now()
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}

	// Settle: every payment applied, both outboxes shipped, the relays
	// stopped, and then every copy on the brokers consumed.
	waitFor(t, settleIn, "C applying every order's payment", func() (bool, string) {
		n := countRows(t, dbC)
		return n >= orders, fmt.Sprintf("C applied %d of %d", n, orders)
	})
	allApplied := time.Now()
	for _, o := range []*outbox.Outbox{outA, outB} {
		waitFor(t, time.Minute, "the outboxes shipping every row", func() (bool, string) {
			n, err := o.Count(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return n.Pending == 0, fmt.Sprintf("%+v", n)
		})
	}
	var relayed []string
	for _, p := range []*racechild.Proc{relayA, relayB} {
		p.Stop()
		relayed = append(relayed, p.Name()+" "+p.Expect(t, "stats ", time.Minute))
		p.Wait(t, time.Minute, racechild.Libraries)
	}
	for _, g := range []struct{ group, topic string }{{groupB, ordersTopic}, {groupC, paymentsTopic}} {
		waitFor(t, time.Minute, "the groups' backlogs reaching 0", func() (bool, string) {
			masters, err := testenv.RocketMQMasters(ctx, ns)
			if err != nil {
				t.Fatal(err)
			}
			var n int64
			for _, topic := range []string{g.topic, "%RETRY%" + g.group} {
				b, err := testenv.RocketMQBacklog(ctx, ns, g.group, topic)
				if err != nil {
					t.Fatal(err)
				}
				n += b
			}
			return len(masters) == 2 && n == 0, fmt.Sprintf("%s: %d messages on %d brokers", g.group, n, len(masters))
		})
	}
	drained := time.Now()
	var stats []string
	for _, p := range []*chainProc{b2, c} {
		p.Stop()
		p.keep(p.Wait(t, drainBound+10*time.Second, racechild.Libraries))
		stats = append(stats, p.Name()+" "+p.stats)
	}

	// The counts.
	derived := make([]string, orders)
	for i, k := range keys {
		d, err := msgkey.Derive(k, groupB, emitName)
		if err != nil {
			t.Fatal(err)
		}
		derived[i] = d
	}
	tb := testkit.Count(keys, testkit.CountBy(t, dbB, "SELECT k, COUNT(*) FROM effects GROUP BY k"), nil)
	tc := testkit.Count(derived, testkit.CountBy(t, dbC, "SELECT k, COUNT(*) FROM effects GROUP BY k"), nil)
	te := testkit.Count(derived, testkit.OutboxKeys(t, outB, 2*orders), nil)
	countsA, err := outA.Count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if countsA.Sent != orders || countsA.Parked != 0 {
		t.Errorf("A's outbox: %+v, want %d sent, none parked", countsA, orders)
	}
	atB := checkCopies(t, "B", slices.Concat(b1.copies, b2.copies), "order-", keys)
	atC := checkCopies(t, "C", c.copies, "payment-", derived)

	// What each fault did.
	victimName := mq.BrokerNames()[victim]
	bCopies := slices.Concat(b1.copies, b2.copies)
	strandedB := stranded(bCopies, victimName, brokerKilled, registered)
	strandedC := stranded(c.copies, victimName, brokerKilled, registered)
	appliers := map[string]string{}
	rows, err := dbB.QueryContext(ctx, "SELECT k, applier FROM effects")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k, by string
		if err := rows.Scan(&k, &by); err != nil {
			t.Fatal(err)
		}
		appliers[k] = by
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	var crossed, appliedByB1, appliedByB2 int
	b2keys := b2.keys()
	for k := range b1.keys() {
		if !b2keys[k] {
			continue
		}
		crossed++
		if appliers[k] == b1.instance {
			appliedByB1++
		} else {
			appliedByB2++
		}
	}
	t.Logf(racechild.Figure+"%d orders written over %v; %v in all (cluster start included); after the last order, C applied every payment in %v, and the backlogs were 0 %v later",
		orders, since(writeEnd), time.Since(begin).Round(100*time.Millisecond), allApplied.Sub(writeEnd).Round(100*time.Millisecond), drained.Sub(allApplied).Round(100*time.Millisecond))
	t.Logf(racechild.Figure+"kill -9 of broker %s at %v, C having applied %d payments: started again on its store, it registered %v after the kill; "+
		"stored on it before the kill and first delivered after it registered: orders %s, payments %s; "+
		"copies stored on it redelivered to the same consumer: %d at B, %d at C",
		victimName, since(brokerKilled), orders/5, registered.Sub(brokerKilled).Round(10*time.Millisecond), strandedB, strandedC,
		redeliveredOn(b1.copies, victimName)+redeliveredOn(b2.copies, victimName), redeliveredOn(c.copies, victimName))
	t.Logf(racechild.Figure+"kill -9 of A's relay at %v, holding its %dth send, stored and not marked: orders stored twice %d (shipped again by its replacement after the %v lease, or retried by the client over the broker's kill)",
		since(relayAKilled), orders*2/5, atB.storedAgain, lease)
	t.Logf(racechild.Figure+"kill -9 of B's consumer at %v, in its %dth handler run, its row written and its payment emitted: it had received %d copies; "+
		"%d orders came to it and to its replacement, which suppressed the %d the killed one had committed and applied the %d it had not (the held one among them)",
		since(b1.Signalled), orders/2, len(b1.copies), crossed, appliedByB1, appliedByB2)
	t.Logf(racechild.Figure+"kill -9 of B's relay at %v, holding its %dth send, stored and not marked: payments stored twice %d",
		since(relayBKilled), orders*3/5, atC.storedAgain)
	t.Logf(racechild.Figure+"effects at B: %v", tb)
	t.Logf(racechild.Figure+"payments in B's outbox: %v", te)
	t.Logf(racechild.Figure+"effects at C: %v", tc)
	t.Logf(racechild.Figure+"delivered at B: %v (%d to the killed consumer's replacement)", atB, atB.redelivered-redelivered(b1.copies)-redelivered(b2.copies))
	t.Logf(racechild.Figure+"delivered at C: %v", atC)
	t.Logf(racechild.Figure+"relays (shipped, marked after their lease): %s", strings.Join(relayed, "; "))
	t.Logf(racechild.Figure+"consumers: %s", strings.Join(stats, "; "))
	// The faults landed where they were meant to.
	if appliers[held] != b2.instance {
		t.Errorf("the order %s, held by B's killed consumer in its open transaction, was applied by %q, not by its replacement", held, appliers[held])
	}
	if atB.storedAgain == 0 || atC.storedAgain == 0 {
		t.Errorf("orders stored twice %d, payments %d: want at least the send each killed relay held", atB.storedAgain, atC.storedAgain)
	}
	for what, tl := range map[string]testkit.Tally{"B's effects": tb, "B's outbox": te, "C's effects": tc} {
		if len(tl.Lost)+len(tl.Doubled)+len(tl.Extra) > 0 {
			t.Errorf("%s: %v; want every order's once: lost %s; doubled %s; unknown %s", what, tl,
				testkit.JoinMax(tl.Lost, 5), testkit.JoinMax(tl.Doubled, 5), testkit.JoinMax(tl.Extra, 5))
		}
	}
}

// migratedOutbox returns an outbox over db, its table made, stamping keys
// from node's generator (0: none, for an outbox that only Emits).
func migratedOutbox(t *testing.T, db *sql.DB, node int64) *outbox.Outbox {
	t.Helper()
	var keys msgkey.Source
	if node != 0 {
		keys = testkit.Keys(t, node)
	}
	o, err := outbox.New(db, dialect.MySQL, keys, outbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return o
}

// migrateService makes a consuming service's tables in db: its dedupe
// records and its effects, a row per message applied, with no unique key
// so that an effect applied twice shows.
func migrateService(t *testing.T, db *sql.DB) {
	t.Helper()
	s, err := sqldedupe.New(db, dialect.MySQL, sqldedupe.Config{CleanupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE effects (k VARCHAR(255) NOT NULL, body VARCHAR(64) NOT NULL, applier VARCHAR(255) NOT NULL)"); err != nil {
		t.Fatal(err)
	}
}

// addOrder writes order i into A's outbox in a transaction of its own and
// returns its key.
func addOrder(ctx context.Context, db *sql.DB, o *outbox.Outbox, topic string, i int) (string, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return "", err
	}
	defer tx.Rollback()
	k, err := o.Add(ctx, tx, outbox.Message{Topic: topic, Body: fmt.Appendf(nil, "order-%d", i)})
	if err != nil {
		return "", err
	}
	return k, tx.Commit()
}

// countRows counts the effects db's service applied.
func countRows(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM effects").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitRows waits until db's service applied n effects.
func waitRows(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	waitFor(t, time.Minute, fmt.Sprintf("%d effects", n), func() (bool, string) {
		got := countRows(t, db)
		return got >= n, fmt.Sprintf("%d applied", got)
	})
}

// waitFor polls cond every 50 ms until it holds, and fails t with what
// and cond's last word on it after timeout, which only keeps a broken
// component from hanging the test.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s after %v: %s", what, timeout, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// chainProc is a chain service's process and the copies it said it got.
type chainProc struct {
	*racechild.Proc
	instance string
	copies   []delivered
	stats    string
}

// delivered is one copy the broker delivered to a service.
type delivered struct {
	key, body, broker string
	stored            string    // the stored message's offset message id
	storedAt, at      time.Time // when the broker stored it; when delivered
}

// keep records lines the process said.
func (p *chainProc) keep(lines []string) {
	for _, l := range lines {
		if rest, ok := strings.CutPrefix(l, "copy "); ok {
			var (
				d            delivered
				storedMs, ms int64
			)
			if _, err := fmt.Sscan(rest, &d.key, &d.body, &d.broker, &d.stored, &storedMs, &ms); err == nil {
				d.storedAt, d.at = time.UnixMilli(storedMs), time.UnixMilli(ms)
				p.copies = append(p.copies, d)
			}
		} else if rest, ok := strings.CutPrefix(l, "stats "); ok {
			p.stats = rest
		}
	}
}

// await reads the process's lines until one starts with prefix, keeping
// the others, and returns the rest of that line.
func (p *chainProc) await(t *testing.T, prefix string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		l, ok := p.Next(t, time.Until(deadline))
		if !ok {
			t.Fatalf("%s exited before saying %q", p.Name(), prefix)
		}
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			return rest
		}
		p.keep([]string{l})
	}
}

// drain keeps what a killed process said.
func (p *chainProc) drain() {
	for l, ok := p.Said(); ok; l, ok = p.Said() {
		p.keep([]string{l})
	}
}

// keys returns the keys delivered to p.
func (p *chainProc) keys() map[string]bool {
	m := map[string]bool{}
	for _, d := range p.copies {
		m[d.key] = true
	}
	return m
}

// copyTally is what the broker delivered to a service.
type copyTally struct {
	deliveries, keys, stored int
	// duplicates are the deliveries beyond the first of each key:
	// stored again (a relay shipped a row again) or redelivered (the same
	// stored copy, after a consumer or broker died before its offset was
	// committed).
	duplicates, storedAgain, redelivered int
}

func (c copyTally) String() string {
	return fmt.Sprintf("%d copies of %d keys, %d duplicates: %d stored again, %d redelivered copies of one stored message",
		c.deliveries, c.keys, c.duplicates, c.storedAgain, c.redelivered)
}

// checkCopies fails t for every copy delivered to service whose key is
// not the key of its body's logical message: the body is prefix and the
// order's number i, whose copies must carry want[i]. It counts the
// duplicates.
func checkCopies(t *testing.T, service string, copies []delivered, prefix string, want []string) copyTally {
	t.Helper()
	keys, stored := map[string]bool{}, map[string]bool{}
	wrong := 0
	for _, d := range copies {
		keys[d.key], stored[d.stored] = true, true
		i, err := strconv.Atoi(strings.TrimPrefix(d.body, prefix))
		if err != nil || !strings.HasPrefix(d.body, prefix) || i < 0 || i >= len(want) || d.key != want[i] {
			if wrong++; wrong <= 5 {
				t.Errorf("a copy delivered to %s: body %q, key %s; want the key of its message", service, d.body, d.key)
			}
		}
	}
	if wrong > 5 {
		t.Errorf("%d copies delivered to %s with a key not their message's", wrong, service)
	}
	return copyTally{
		deliveries: len(copies), keys: len(keys), stored: len(stored),
		duplicates: len(copies) - len(keys), storedAgain: len(stored) - len(keys), redelivered: len(copies) - len(stored),
	}
}

// stranded counts the messages stored on broker before it was killed and
// first delivered after it registered again, and says how long after that
// the last of them came.
func stranded(copies []delivered, broker string, killed, registered time.Time) string {
	first := map[string]delivered{}
	for _, d := range copies {
		if f, ok := first[d.stored]; d.broker == broker && (!ok || d.at.Before(f.at)) {
			first[d.stored] = d
		}
	}
	n, last := 0, time.Duration(0)
	for _, d := range first {
		if d.storedAt.Before(killed) && !d.at.Before(registered) {
			n++
			last = max(last, d.at.Sub(registered))
		}
	}
	if n == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (the last %v after)", n, last.Round(10*time.Millisecond))
}

// redeliveredOn counts the copies delivered again of messages stored on
// broker.
func redeliveredOn(copies []delivered, broker string) int {
	return redelivered(slices.DeleteFunc(slices.Clone(copies), func(d delivered) bool { return d.broker != broker }))
}

// redelivered counts the copies delivered again of the same stored
// messages.
func redelivered(copies []delivered) int {
	stored := map[string]bool{}
	for _, d := range copies {
		stored[d.stored] = true
	}
	return len(copies) - len(stored)
}
