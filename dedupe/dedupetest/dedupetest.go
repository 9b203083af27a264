// Package dedupetest checks dedupe stores against the [dedupe.Store]
// contract: [RunConformanceTests] is the conformance suite every backend
// runs from its own tests, a store author's too.
//
//	func TestConformance(t *testing.T) {
//		dedupetest.RunConformanceTests(t, func(t *testing.T) dedupe.Store {
//			return memdedupe.New(memdedupe.Config{})
//		}, dedupetest.Features{})
//	}
//
// [RunConformanceTests] takes a [Features] struct whose zero value
// describes a plain [dedupe.Store]; each field states what it changes.
//
// Every test claims keys under a namespace and group of its own, so the
// stores newStore returns may share one server and its old records.
// [RunConformanceTests] lists what the suite checks.
package dedupetest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/dedupekit"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
)

// Features describes where a store differs from the others.
type Features struct {
	// Inspector says the store implements [dedupe.Inspector]; the suite
	// then fails if it does not. Either way the Inspector tests run when
	// the store implements it.
	Inspector bool
	// UnorderedList says List pages come in the order a SCAN finds the
	// keys, as [dedupe.Inspector] allows Redis: the suite then accepts
	// pages in any order, with a few more records than the limit, and a
	// key listed twice.
	UnorderedList bool
	// Tx, for a store that implements [dedupe.TxClaimer], gives the
	// database it keeps its records in: the suite then checks ClaimTx
	// and a [dedupe.Guard] in the transactional mode over the store.
	Tx *TxDatabase
	// LostAnswer, for a store whose client sends a request again on
	// another connection when one drops, returns such a store (on a
	// server of its own, or with records of its own) and lose, which
	// makes the server's answer to the next claim of keys in namespace ns
	// be lost once, after the server ran it; dropped reports whether it
	// was. The suite then checks that the claim, sent again with its
	// token, takes the record it wrote as its own.
	LostAnswer func(t *testing.T) (s dedupe.Store, lose func(ns string) (dropped func() bool))
	// Unreachable returns a store whose server cannot be reached at
	// addr, and the name of its package: the suite checks that every call
	// fails with a plain error that begins with the package and the call
	// and names addr.
	Unreachable func(t *testing.T) (s dedupe.Store, pkg, addr string)
	// KeepsTrace says the store keeps a completion's [dedupe.Ticket.Trace]
	// and answers it in every Suppressed claim, as memdedupe and Redis
	// do: the suite then checks what it answers (and, with an Inspector,
	// the record's Trace). Without it, the suite checks only that
	// completions with traces, well formed or not, succeed and leave the
	// key done, as a store that keeps none (SQL) must.
	KeepsTrace bool
}

// long is a lease or retention that no test outlives.
const long = time.Hour

// shortLease is the lease and retention the suite waits out to test expiry by
// the store's clock; each such test sleeps one and a half times it.
const shortLease = 150 * time.Millisecond

// RunConformanceTests runs the conformance suite as subtests of t. newStore returns the
// store under test; it is called once per subtest, and whatever it opens it
// closes through t.Cleanup.
//
// It checks:
//
//   - the state machine: claim twice, release and reclaim at once, complete
//     (and retry a complete), extend, stale and forged tokens refused;
//   - expiry by the store's clock: leases and retention of 150ms run out
//     while the suite sleeps;
//   - races: 32 goroutines claim one key (fresh, and just expired) and
//     exactly one wins; overlapping batches in different orders neither
//     fail nor deadlock;
//   - churn: 32 goroutines claim four keys alone and in batches, then
//     complete, release, extend or abandon them, some after their lease ran
//     out: no call fails, no key has two owners at once, no owner succeeds
//     after its lease ended or loses one that has not;
//   - payload fingerprints and conflicts, compared only between
//     fingerprints of one length; batches with mixed answers and a
//     key twice; cancelled contexts and non-positive durations;
//   - failures mid-call, before or after reaching the store: nothing is
//     recorded wrongly and every write can be retried;
//   - claims of many keys that fail part-way, through a context that
//     expires mid-call: every key is free again at once;
//   - keys as data: quotes, SQL, Lua, glob and LIKE patterns, Redis hash
//     tags, the longest valid parts in multi-byte UTF-8, and no case
//     folding, padding or Unicode normalisation; bad keys (too long, invalid
//     UTF-8, control characters) refused with [msgkey.ErrInvalid];
//   - a [dedupe.Inspector], if the store has one: records as claimed,
//     completed, released and expired; listings paged to the end, by
//     prefixes that are LIKE and glob patterns, in scopes that hold them
//     too; stats; Forget of a held key, whose holder then loses its lease,
//     and of a done one, which runs again; bad refs and cancelled contexts;
//   - with [Features.LostAnswer]: a claim whose answer was lost and which
//     the client sent again is acquired, its token completes the key, and
//     held keys in its batch stay busy;
//   - with [Features.Unreachable]: every call of a store whose server
//     cannot be reached fails with a plain error naming the call and the
//     address;
//   - a completion's trace: kept and answered by a Suppressed claim, with
//     [Features.KeepsTrace], replaced by a retry's, dropped when it is
//     not printable or too long, never mistaken for a fingerprint (a
//     done key with a trace still answers Reused to another payload);
//     without it, completions with traces succeed all the same;
//   - with [Features.Tx]: claims in a transaction commit or roll back with
//     the caller's writes, answer as Claim's would, take over ended
//     records, wait for another transaction's claim or give up after the
//     lock timeout, and refuse bad keys and arguments; a transactional
//     [dedupe.Guard] runs every outcome, a panic, an Interrupt and a
//     failing store.
//
// The suite takes a few seconds: a dozen waits of one and a half leases,
// and ten leases of churn.
func RunConformanceTests(t *testing.T, newStore func(t *testing.T) dedupe.Store, f Features) {
	tests := []struct {
		name string
		fn   func(*suite)
	}{
		{"ClaimTwice", testClaimTwice},
		{"Scopes", testScopes},
		{"ConcurrentClaim", testConcurrentClaim},
		{"ConcurrentBatches", testConcurrentBatches},
		{"Churn", testChurn},
		{"LeaseExpiry", testLeaseExpiry},
		{"StaleToken", testStaleToken},
		{"Release", testRelease},
		{"Complete", testComplete},
		{"RetentionExpiry", testRetentionExpiry},
		{"Extend", testExtend},
		{"Fingerprint", testFingerprint},
		{"Batch", testBatch},
		{"FailedBatch", testFailedBatch},
		{"Durations", testDurations},
		{"CancelledContext", testCancelledContext},
		{"Faults", testFaults},
		{"HostileKeys", testHostileKeys},
		{"InvalidKeys", testInvalidKeys},
		{"Verbatim", testVerbatim},
		{"Trace", testTrace},
		{"Inspector", testInspector},
		{"LostAnswer", testLostAnswer},
		{"Unreachable", testUnreachable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &suite{T: t, store: newStore(t), f: f, id: rand.Text()[:12]}
			tc.fn(s)
		})
	}
	if f.Tx == nil {
		return
	}
	for _, tc := range txTests {
		t.Run(tc.name, func(t *testing.T) {
			s := &suite{T: t, store: newStore(t), f: f, id: rand.Text()[:12]}
			tc.fn(s.tx())
		})
	}
}

// suite is one subtest's store and helpers.
type suite struct {
	*testing.T
	store dedupe.Store
	f     Features
	id    string // unique to the subtest; keeps its records apart
}

func (s *suite) ref(key string) dedupe.Ref {
	return dedupe.Ref{Namespace: "dedupetest", Group: s.id, Key: key}
}

// expire sleeps until a lease or retention of shortLease that began before
// the call has ended by any clock that runs at the rate of ours.
func (s *suite) expire() { time.Sleep(shortLease * 3 / 2) }

// stalled reports whether a lease or retention of d, begun by a call sent
// at sent, may have ended by now by any clock that runs at the rate of
// ours: the machine stalled for d, and a store that let it go did right.
// What an answer received by now says of it is then not judged; stalled
// logs that, and why.
func (s *suite) stalled(sent time.Time, d time.Duration, what string) bool {
	s.Helper()
	if e := time.Since(sent); e >= d {
		s.Logf("not judged: %s, %v after the call that began a lease or retention of %v: the machine stalled", what, e.Round(time.Millisecond), d)
		return true
	}
	return false
}

func (s *suite) claimFP(ref dedupe.Ref, lease time.Duration, fp string) dedupe.ClaimResult {
	s.Helper()
	res, err := testkit.Claim(s.Context(), s.store, dedupe.Item{Ref: ref, Fingerprint: fp}, lease)
	if err != nil {
		s.Fatalf("Claim(%q, %v, %q): %v", ref, lease, fp, err)
	}
	return res
}

// want claims ref for long with fingerprint fp and checks the answer. An
// Acquired answer must carry a token, InFlight and Done a time left.
func (s *suite) want(ref dedupe.Ref, fp string, want dedupe.Outcome) dedupe.ClaimResult {
	s.Helper()
	res := s.claimFP(ref, long, fp)
	if res.Outcome != want {
		s.Fatalf("Claim(%q, fingerprint %q) = %v, want %v", ref, fp, res.Outcome, want)
	}
	s.checkResult(ref, res, long)
	return res
}

// checkResult checks the fields that go with res.Outcome. lease bounds the
// time left of an InFlight answer.
func (s *suite) checkResult(ref dedupe.Ref, res dedupe.ClaimResult, lease time.Duration) {
	s.Helper()
	switch res.Outcome {
	case dedupe.Acquired:
		if res.Token == "" || !res.Until.IsZero() || res.Remaining != 0 {
			s.Errorf("Claim(%q) = acquired with token %q, until %v, remaining %v; want a token and no time", ref, res.Token, res.Until, res.Remaining)
		}
	case dedupe.Busy, dedupe.Suppressed:
		if res.Token != "" || res.Until.IsZero() || res.Remaining <= 0 {
			s.Errorf("Claim(%q) = %v with token %q, until %v, remaining %v; want no token and a time", ref, res.Outcome, res.Token, res.Until, res.Remaining)
		}
		if res.Outcome == dedupe.Busy && res.Remaining > lease {
			s.Errorf("Claim(%q) = in flight for %v, longer than the lease %v", ref, res.Remaining, lease)
		}
	case dedupe.Reused:
		if res.Token != "" {
			s.Errorf("Claim(%q) = conflict with token %q", ref, res.Token)
		}
	default:
		s.Errorf("Claim(%q) = %v, not a status", ref, res.Outcome)
	}
	if res.Outcome != dedupe.Suppressed && res.Trace != "" {
		s.Errorf("Claim(%q) = %v with trace %q; only a done key has one", ref, res.Outcome, res.Trace)
	}
}

// acquire claims ref, which must be free, for lease and returns its ticket.
func (s *suite) acquire(ref dedupe.Ref, lease time.Duration) dedupe.Ticket {
	s.Helper()
	res := s.claimFP(ref, lease, "")
	if res.Outcome != dedupe.Acquired {
		s.Fatalf("Claim(%q) = %v, want acquired", ref, res.Outcome)
	}
	s.checkResult(ref, res, lease)
	return dedupe.Ticket{Ref: ref, Token: res.Token}
}

func (s *suite) complete(t dedupe.Ticket, retention time.Duration, want error) {
	s.Helper()
	if err := testkit.Complete(s.Context(), s.store, t, retention); !matches(err, want) {
		s.Fatalf("Complete(%q, %v) = %v, want %v", t.Ref, retention, err, want)
	}
}

func (s *suite) release(t dedupe.Ticket, want error) {
	s.Helper()
	if err := testkit.Release(s.Context(), s.store, t); !matches(err, want) {
		s.Fatalf("Release(%q) = %v, want %v", t.Ref, err, want)
	}
}

func (s *suite) extend(t dedupe.Ticket, lease time.Duration, want error) {
	s.Helper()
	if err := s.store.Extend(s.Context(), t, lease); !matches(err, want) {
		s.Fatalf("Extend(%q, %v) = %v, want %v", t.Ref, lease, err, want)
	}
}

// matches reports whether err is want: nil for nil, errors.Is otherwise.
func matches(err, want error) bool {
	if want == nil {
		return err == nil
	}
	return errors.Is(err, want)
}

// isSentinel reports whether err is one of the contract's answers rather
// than a failure to reach the store.
func isSentinel(err error) bool {
	return errors.Is(err, msgkey.ErrInvalid) || errors.Is(err, dedupe.ErrLeaseLost) ||
		errors.Is(err, dedupe.ErrBusy)
}

func testClaimTwice(s *suite) {
	r := s.ref("k")
	tk := s.acquire(r, long)
	s.want(r, "", dedupe.Busy)
	other := s.acquire(s.ref("k2"), long)
	if other.Token == tk.Token {
		s.Errorf("two claims got the same token %q", tk.Token)
	}
	s.complete(tk, long, nil)
	s.want(r, "", dedupe.Suppressed)
}

// testScopes checks that namespace, group and key each separate records, and
// that no way of joining them makes two Refs one.
func testScopes(s *suite) {
	base := dedupe.Ref{Namespace: s.id, Group: "g", Key: "k"}
	s.acquire(base, long)
	for _, r := range []dedupe.Ref{
		{Namespace: s.id, Group: "g", Key: "k2"},
		{Namespace: s.id, Group: "g2", Key: "k"},
		{Namespace: s.id + "x", Group: "g", Key: "k"},
		{Namespace: "", Group: s.id + "g", Key: "k"},
	} {
		s.acquire(r, long)
	}
	// Each pair differs only in where a separator-like character sits.
	for _, sep := range []string{":", "/", "|", "{", "}", "\\", " ", ".", "%", "'", "", "\u00a0", "::", "}{"} {
		pairs := [][2]dedupe.Ref{
			{{Namespace: s.id + sep + "a", Group: "b", Key: "k"}, {Namespace: s.id, Group: "a" + sep + "b", Key: "k"}},
			{{Namespace: s.id, Group: "a" + sep + "b", Key: "c"}, {Namespace: s.id, Group: "a", Key: "b" + sep + "c"}},
			{{Namespace: s.id, Group: "x" + sep, Key: "y"}, {Namespace: s.id, Group: "x", Key: sep + "y"}},
		}
		for _, p := range pairs {
			if p[0] == p[1] {
				continue // sep ""
			}
			s.acquire(p[0], long)
			if res := s.claimFP(p[1], long, ""); res.Outcome != dedupe.Acquired {
				s.Errorf("Claim(%#v) after claiming %#v = %v, want acquired: the two share a record", p[1], p[0], res.Outcome)
			}
		}
	}
}

// testConcurrentClaim races 32 claims of one key: fresh keys, then a key
// whose lease has just expired. Exactly one claim may win each race.
func testConcurrentClaim(s *suite) {
	const n = 32
	race := func(r dedupe.Ref) {
		s.Helper()
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			res   = make([]dedupe.ClaimResult, n)
			errs  = make([]error, n)
		)
		for i := range n {
			wg.Go(func() {
				<-start
				res[i], errs[i] = testkit.Claim(s.Context(), s.store, dedupe.Item{Ref: r}, long)
			})
		}
		close(start)
		wg.Wait()
		won := 0
		for i := range n {
			switch {
			case errs[i] != nil:
				s.Errorf("claim %d of %q: %v", i, r, errs[i])
			case res[i].Outcome == dedupe.Acquired:
				won++
			case res[i].Outcome != dedupe.Busy:
				s.Errorf("claim %d of %q = %v, want acquired or in flight", i, r, res[i].Outcome)
			}
		}
		if won != 1 {
			s.Errorf("%d of %d concurrent claims of %q acquired it, want exactly 1", won, n, r)
		}
	}
	for i := range 3 {
		race(s.ref(fmt.Sprint("fresh", i)))
	}
	r := s.ref("expired")
	s.acquire(r, shortLease)
	s.expire()
	race(r)
}

// testConcurrentBatches claims one set of keys from several goroutines at
// once, each in its own order: every key is acquired exactly once, and the
// store neither fails nor deadlocks.
func testConcurrentBatches(s *suite) {
	const workers, keys = 4, 16
	var refs []dedupe.Item
	for i := range keys {
		refs = append(refs, dedupe.Item{Ref: s.ref(fmt.Sprint("k", i))})
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		owner = map[dedupe.Ref]int{}
	)
	for w := range workers {
		reqs := slices.Clone(refs)
		// A different rotation and direction per worker.
		reqs = append(reqs[w*keys/workers:], reqs[:w*keys/workers]...)
		if w%2 == 1 {
			slices.Reverse(reqs)
		}
		wg.Go(func() {
			res, errs, err := s.store.Claim(s.Context(), reqs, long)
			if err != nil {
				s.Errorf("worker %d: Claim: %v", w, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for i, r := range res {
				switch {
				case errs[i] != nil:
					s.Errorf("worker %d: claim %q: %v", w, reqs[i].Ref, errs[i])
				case r.Outcome == dedupe.Acquired:
					owner[reqs[i].Ref]++
				case r.Outcome != dedupe.Busy:
					s.Errorf("worker %d: claim %q = %v, want acquired or in flight", w, reqs[i].Ref, r.Outcome)
				}
			}
		})
	}
	wg.Wait()
	for _, r := range refs {
		if owner[r.Ref] != 1 {
			s.Errorf("%q acquired %d times, want once", r.Ref, owner[r.Ref])
		}
	}
}

// grant is one Acquired answer in testChurn and what became of it, in times
// of the test's clock.
type grant struct {
	worker int
	// t0 and t1 bound the claim call that answered Acquired.
	t0, t1 time.Time
	// renewed0 and renewed1 bound the call that last started the lease:
	// the claim, or a successful Extend.
	renewed0, renewed1 time.Time
	// held is when the record the grant made certainly still stood: the
	// start of its Release, its Complete's start plus the retention, or
	// its lease's earliest end.
	held time.Time
}

// testChurn runs workers that claim a few shared keys, alone and in
// batches, then complete, release, extend or abandon them, some after their
// lease has run out, with leases and retentions that end during the run.
// No call may fail, and the answers must be those of one record per key:
// no claim acquires a key while another owner's lease or a done record
// certainly holds it, no owner succeeds after its lease certainly ended,
// and none is told its lease is lost before it could have ended.
func testChurn(s *suite) {
	const workers, keys = 32, 4
	lease := shortLease
	retention := lease / 4
	// slack covers the store clock's resolution against ours.
	const slack = 2 * time.Millisecond
	refs := make([]dedupe.Ref, keys)
	for i := range refs {
		refs[i] = s.ref(fmt.Sprint("k", i))
	}
	var (
		mu     sync.Mutex
		grants = map[dedupe.Ref][]*grant{}
	)
	stop := time.Now().Add(10 * lease)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := mathrand.New(mathrand.NewPCG(uint64(w), 0))
			for time.Now().Before(stop) {
				mine := s.churnClaim(w, rng, refs, lease)
				if len(mine) == 0 {
					continue
				}
				s.churnFinish(rng, mine, lease, retention, slack)
				mu.Lock()
				for _, m := range mine {
					grants[m.Ref] = append(grants[m.Ref], m.grant)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	n := 0
	for r, gs := range grants {
		n += len(gs)
		slices.SortFunc(gs, func(a, b *grant) int { return a.t0.Compare(b.t0) })
		for i, a := range gs {
			// Only a claim that began while a held the key can break it.
			for _, b := range gs[i+1:] {
				if !b.t0.Before(a.held) {
					break
				}
				if b.t0.After(a.t1) && b.t1.Before(a.held) {
					s.Errorf("%q: worker %d acquired it in [%v, %v] while worker %d's grant of [%v, %v] held it until %v",
						r, b.worker, b.t0.Format(stamp), b.t1.Format(stamp), a.worker, a.t0.Format(stamp), a.t1.Format(stamp), a.held.Format(stamp))
				}
			}
		}
	}
	s.Logf("%d keys acquired %d times by %d workers", keys, n, workers)
}

const stamp = "15:04:05.000000"

// owned is a key a churn worker acquired.
type owned struct {
	dedupe.Ticket
	*grant
}

// churnClaim claims one to three of refs, a key possibly twice, and returns
// those acquired.
func (s *suite) churnClaim(w int, rng *mathrand.Rand, refs []dedupe.Ref, lease time.Duration) []owned {
	reqs := make([]dedupe.Item, 1+rng.IntN(3))
	for i := range reqs {
		reqs[i] = dedupe.Item{Ref: refs[rng.IntN(len(refs))]}
	}
	t0 := time.Now()
	res, errs, err := s.store.Claim(s.Context(), reqs, lease)
	t1 := time.Now()
	if err != nil {
		s.Errorf("worker %d: claim of %d keys: %v", w, len(reqs), err)
		return nil
	}
	var mine []owned
	for i, r := range res {
		if errs[i] != nil {
			s.Errorf("worker %d: claim %q: %v", w, reqs[i].Ref, errs[i])
			continue
		}
		// The store's now is some instant of the call: one that waited
		// for a lock may count a lease taken meanwhile from before it.
		s.checkResult(reqs[i].Ref, r, lease+t1.Sub(t0))
		switch r.Outcome {
		case dedupe.Acquired:
			g := &grant{worker: w, t0: t0, t1: t1, renewed0: t0, renewed1: t1}
			mine = append(mine, owned{dedupe.Ticket{Ref: reqs[i].Ref, Token: r.Token}, g})
		case dedupe.Reused:
			s.Errorf("worker %d: claim %q without fingerprints = conflict", w, reqs[i].Ref)
		}
	}
	return mine
}

// churnFinish completes, releases, extends or abandons the keys a worker
// acquired, sometimes after their lease has ended, and checks every answer
// against the grants' times.
func (s *suite) churnFinish(rng *mathrand.Rand, mine []owned, lease, retention, slack time.Duration) {
	ts := make([]dedupe.Ticket, len(mine))
	for i, m := range mine {
		ts[i] = m.Ticket
	}
	// check judges one answer to a call made in [o0, o1] and reports
	// whether the token still owned the key.
	check := func(m owned, what string, o0, o1 time.Time, err error) bool {
		switch {
		case err == nil:
			if o0.After(m.renewed1.Add(lease + slack)) {
				s.Errorf("worker %d: %s %q succeeded at %v, after its lease of %v from %v ended", m.worker, what, m.Ref, o0.Format(stamp), lease, m.renewed1.Format(stamp))
			}
			return true
		case errors.Is(err, dedupe.ErrLeaseLost):
			if o1.Before(m.renewed0.Add(lease - slack)) {
				s.Errorf("worker %d: %s %q lost its lease at %v, before its lease of %v from %v could end", m.worker, what, m.Ref, o1.Format(stamp), lease, m.renewed0.Format(stamp))
			}
		default:
			s.Errorf("worker %d: %s %q: %v", m.worker, what, m.Ref, err)
		}
		return false
	}
	if rng.IntN(64) == 0 {
		time.Sleep(lease + lease/4) // an owner that outlives its lease
	}
	if rng.IntN(8) == 0 {
		for _, m := range mine {
			o0 := time.Now()
			err := s.store.Extend(s.Context(), m.Ticket, lease)
			if o1 := time.Now(); check(m, "extend", o0, o1, err) {
				m.renewed0, m.renewed1 = o0, o1
			}
		}
	}
	for _, m := range mine {
		m.held = m.renewed0.Add(lease - slack)
	}
	o0 := time.Now()
	var (
		errs []error
		err  error
		what string
	)
	switch rng.IntN(64) {
	case 0: // abandoned: the lease runs out
		return
	case 1, 2, 3, 4:
		what = "complete"
		errs, err = s.store.Complete(s.Context(), ts, retention)
	default:
		what = "release"
		errs, err = s.store.Release(s.Context(), ts)
	}
	o1 := time.Now()
	if err != nil {
		s.Errorf("worker %d: %s of %d keys: %v", mine[0].worker, what, len(ts), err)
		return
	}
	for i, m := range mine {
		if !check(m, what, o0, o1, errs[i]) {
			continue
		}
		if what == "complete" {
			m.held = o0.Add(retention - slack)
		} else {
			m.held = o0
		}
	}
}

func testLeaseExpiry(s *suite) {
	r := s.ref("k")
	old := s.acquire(r, shortLease)
	s.expire()
	if tk := s.acquire(r, long); tk.Token == old.Token {
		s.Errorf("reclaim after the lease expired reused token %q", old.Token)
	}
	s.want(r, "", dedupe.Busy)
}

func testStaleToken(s *suite) {
	s.Run("Reclaimed", func(t *testing.T) {
		s := s.sub(t)
		r := s.ref("k")
		stale := s.acquire(r, shortLease)
		s.expire()
		owner := s.acquire(r, long)
		s.complete(stale, long, dedupe.ErrLeaseLost)
		s.release(stale, dedupe.ErrLeaseLost)
		s.extend(stale, long, dedupe.ErrLeaseLost)
		s.want(r, "", dedupe.Busy)
		s.complete(owner, long, nil)
		s.want(r, "", dedupe.Suppressed)
		s.release(stale, dedupe.ErrLeaseLost)
		s.want(r, "", dedupe.Suppressed)
	})
	s.Run("ExpiredNotReclaimed", func(t *testing.T) {
		s := s.sub(t)
		r := s.ref("k")
		stale := s.acquire(r, shortLease)
		s.expire()
		s.complete(stale, long, dedupe.ErrLeaseLost)
		s.extend(stale, long, dedupe.ErrLeaseLost)
		s.release(stale, dedupe.ErrLeaseLost)
		s.acquire(r, long)
	})
	s.Run("Foreign", func(t *testing.T) {
		s := s.sub(t)
		r := s.ref("k")
		owner := s.acquire(r, long)
		for _, token := range []string{"", "bogus", owner.Token + "x", strings.ToUpper(owner.Token), strings.ToLower(owner.Token), owner.Token[:len(owner.Token)-1], " " + owner.Token} {
			if token == owner.Token {
				continue
			}
			forged := dedupe.Ticket{Ref: r, Token: token}
			s.complete(forged, long, dedupe.ErrLeaseLost)
			s.extend(forged, long, dedupe.ErrLeaseLost)
			s.release(forged, dedupe.ErrLeaseLost)
		}
		// Another key's token does not own this one.
		other := s.acquire(s.ref("other"), long)
		s.complete(dedupe.Ticket{Ref: r, Token: other.Token}, long, dedupe.ErrLeaseLost)
		s.want(r, "", dedupe.Busy)
		s.complete(owner, long, nil)
	})
	s.Run("NeverClaimed", func(t *testing.T) {
		s := s.sub(t)
		tk := dedupe.Ticket{Ref: s.ref("k"), Token: "bogus"}
		s.complete(tk, long, dedupe.ErrLeaseLost)
		s.extend(tk, long, dedupe.ErrLeaseLost)
		s.release(tk, dedupe.ErrLeaseLost)
		s.acquire(tk.Ref, long)
	})
}

// sub returns a suite for subtest t over the same store.
func (s *suite) sub(t *testing.T) *suite {
	return &suite{T: t, store: s.store, f: s.f, id: s.id + "-" + rand.Text()[:6]}
}

func testRelease(s *suite) {
	r := s.ref("k")
	old := s.acquire(r, long)
	s.release(old, nil)
	tk := s.acquire(r, long) // at once: a failed message's redelivery runs
	if tk.Token == old.Token {
		s.Errorf("reclaim after release reused token %q", old.Token)
	}
	s.release(old, dedupe.ErrLeaseLost)
	s.complete(old, long, dedupe.ErrLeaseLost)
	s.extend(old, long, dedupe.ErrLeaseLost)
	s.want(r, "", dedupe.Busy)
	s.complete(tk, long, nil)
	// A done record is not released: the message was processed.
	s.release(tk, dedupe.ErrLeaseLost)
	s.want(r, "", dedupe.Suppressed)
}

func testComplete(s *suite) {
	r := s.ref("k")
	tk := s.acquire(r, long)
	s.complete(tk, long, nil)
	res := s.want(r, "", dedupe.Suppressed)
	if res.Remaining > long {
		s.Errorf("done for %v more, longer than the retention %v", res.Remaining, long)
	}
	s.complete(tk, long, nil) // a retry of a Complete whose answer was lost
	s.complete(dedupe.Ticket{Ref: r, Token: "bogus"}, long, dedupe.ErrLeaseLost)
	s.extend(tk, long, dedupe.ErrLeaseLost)
	s.release(tk, dedupe.ErrLeaseLost)
	s.want(r, "", dedupe.Suppressed)

	// A retry restarts the retention.
	r = s.ref("retry")
	tk = s.acquire(r, long)
	sent := time.Now()
	s.complete(tk, 4*shortLease, nil)
	if err := testkit.Complete(s.Context(), s.store, tk, long); err != nil {
		if errors.Is(err, dedupe.ErrLeaseLost) && s.stalled(sent, 4*shortLease, "the retried Complete found the record gone") {
			return
		}
		s.Fatalf("Complete(%q, %v) again = %v", r, long, err)
	}
	time.Sleep(5 * shortLease)
	s.want(r, "", dedupe.Suppressed)
}

func testRetentionExpiry(s *suite) {
	r := s.ref("k")
	tk := s.acquire(r, long)
	s.complete(tk, shortLease, nil)
	s.expire()
	s.complete(tk, long, dedupe.ErrLeaseLost)
	s.acquire(r, long)
}

func testExtend(s *suite) {
	s.Run("Lengthen", func(t *testing.T) {
		s := s.sub(t)
		r := s.ref("k")
		sent := time.Now()
		tk := s.acquire(r, 4*shortLease)
		if err := s.store.Extend(s.Context(), tk, long); err != nil {
			if errors.Is(err, dedupe.ErrLeaseLost) && s.stalled(sent, 4*shortLease, "Extend found the lease gone") {
				return
			}
			s.Fatalf("Extend(%q, %v) = %v", r, long, err)
		}
		time.Sleep(5 * shortLease)
		res := s.want(r, "", dedupe.Busy)
		if res.Remaining <= long/2 {
			s.Errorf("in flight for %v more after extending to %v", res.Remaining, long)
		}
		s.complete(tk, long, nil)
	})
	s.Run("Shorten", func(t *testing.T) {
		s := s.sub(t)
		r := s.ref("k")
		tk := s.acquire(r, long)
		s.extend(tk, shortLease, nil)
		s.expire()
		s.extend(tk, long, dedupe.ErrLeaseLost) // no resurrection
		s.acquire(r, long)
	})
}

func testFingerprint(s *suite) {
	fa, fb := dedupekit.Fingerprint([]byte("a")), dedupekit.Fingerprint([]byte("b"))
	s.Run("InFlight", func(t *testing.T) {
		s := s.sub(t)
		r := s.ref("k")
		res := s.claimFP(r, long, fa)
		if res.Outcome != dedupe.Acquired {
			s.Fatalf("first claim = %v", res.Outcome)
		}
		s.want(r, fb, dedupe.Reused)
		s.want(r, fa, dedupe.Busy)
		s.want(r, "", dedupe.Busy)
		s.complete(dedupe.Ticket{Ref: r, Token: res.Token}, long, nil)
		s.want(r, fb, dedupe.Reused)
		s.want(r, fa, dedupe.Suppressed)
		s.want(r, "", dedupe.Suppressed)
	})
	s.Run("RecordWithout", func(t *testing.T) {
		s := s.sub(t)
		r := s.ref("k")
		s.complete(s.acquire(r, long), long, nil)
		s.want(r, fb, dedupe.Suppressed)
	})
	s.Run("Expired", func(t *testing.T) {
		s := s.sub(t)
		r := s.ref("k")
		if res := s.claimFP(r, shortLease, fa); res.Outcome != dedupe.Acquired {
			s.Fatalf("first claim = %v", res.Outcome)
		}
		s.expire()
		// An expired lease is no record: the new claim's fingerprint holds.
		if res := s.claimFP(r, long, fb); res.Outcome != dedupe.Acquired {
			s.Fatalf("claim after expiry = %v, want acquired", res.Outcome)
		}
		s.want(r, fa, dedupe.Reused)
	})
	s.Run("Released", func(t *testing.T) {
		s := s.sub(t)
		r := s.ref("k")
		res := s.claimFP(r, long, fa)
		s.release(dedupe.Ticket{Ref: r, Token: res.Token}, nil)
		if res := s.claimFP(r, long, fb); res.Outcome != dedupe.Acquired {
			s.Fatalf("claim after release = %v, want acquired", res.Outcome)
		}
	})
	s.Run("OtherKind", func(t *testing.T) {
		// Fingerprints of different lengths, such as the hex SHA-256 that
		// earlier versions recorded and Fingerprint's, are of different
		// kinds and not compared: an upgrade from one to the other must
		// not report every key done or in flight across it as reused.
		s := s.sub(t)
		sha := func(p string) string {
			sum := sha256.Sum256([]byte(p))
			return hex.EncodeToString(sum[:])
		}
		r := s.ref("long")
		res := s.claimFP(r, long, sha("a"))
		if res.Outcome != dedupe.Acquired {
			s.Fatalf("first claim = %v", res.Outcome)
		}
		s.want(r, fb, dedupe.Busy)
		s.want(r, sha("b"), dedupe.Reused)
		s.complete(dedupe.Ticket{Ref: r, Token: res.Token}, long, nil)
		s.want(r, fa, dedupe.Suppressed)
		s.want(r, fb, dedupe.Suppressed)
		s.want(r, sha("a"), dedupe.Suppressed)
		s.want(r, sha("b"), dedupe.Reused)

		r = s.ref("shortLease")
		res = s.claimFP(r, long, fa)
		s.want(r, sha("b"), dedupe.Busy)
		s.complete(dedupe.Ticket{Ref: r, Token: res.Token}, long, nil)
		s.want(r, sha("b"), dedupe.Suppressed)
		s.want(r, fb, dedupe.Reused)
	})
	s.Run("Verbatim", func(t *testing.T) {
		s := s.sub(t)
		r := s.ref("k")
		// The longest fingerprint, in multi-byte UTF-8. Each variant has its
		// length in bytes and differs from it only in case, in one accent,
		// in its last byte or in its Unicode normalisation.
		fp := strings.Repeat("é", dedupekit.MaxFingerprint/2-2) + "e\u0308e"
		s.claimFP(r, long, fp)
		s.want(r, fp, dedupe.Busy)
		for _, other := range []string{
			strings.ToUpper(fp),
			strings.Replace(fp, "é", "è", 1),
			fp[:len(fp)-1] + "f",
			strings.Repeat("é", dedupekit.MaxFingerprint/2-3) + "e\u0301ëe",
		} {
			if len(other) != len(fp) {
				s.Fatalf("variant %q is %d bytes, want %d", other, len(other), len(fp))
			}
			s.want(r, other, dedupe.Reused)
		}
	})
	s.Run("Batch", func(t *testing.T) {
		// Within a batch, a key's later claims meet the record its first
		// one wrote, as single calls one after another would.
		s := s.sub(t)
		r := s.ref("k")
		reqs := []dedupe.Item{{Ref: r, Fingerprint: fa}, {Ref: r, Fingerprint: fb}, {Ref: r, Fingerprint: fa}, {Ref: r}}
		check := func(want ...dedupe.Outcome) []dedupe.ClaimResult {
			t.Helper()
			res, errs, err := s.store.Claim(s.Context(), reqs, long)
			if err != nil {
				t.Fatalf("Claim: %v", err)
			}
			for i, w := range want {
				if errs[i] != nil || res[i].Outcome != w {
					t.Errorf("Claim item %d (fingerprint %q) = %v, %v; want %v", i, reqs[i].Fingerprint, res[i].Outcome, errs[i], w)
				}
				s.checkResult(r, res[i], long)
			}
			return res
		}
		res := check(dedupe.Acquired, dedupe.Reused, dedupe.Busy, dedupe.Busy)
		s.complete(dedupe.Ticket{Ref: r, Token: res[0].Token}, long, nil)
		check(dedupe.Suppressed, dedupe.Reused, dedupe.Suppressed, dedupe.Suppressed)
	})
	s.Run("Invalid", func(t *testing.T) {
		s := s.sub(t)
		r := s.ref("k")
		for _, fp := range []string{strings.Repeat("f", dedupekit.MaxFingerprint+1), "\xff", "a\x00"} {
			_, err := testkit.Claim(s.Context(), s.store, dedupe.Item{Ref: r, Fingerprint: fp}, long)
			if !errors.Is(err, msgkey.ErrInvalid) {
				s.Errorf("Claim with fingerprint %q = %v, want msgkey.ErrInvalid", fp, err)
			}
		}
		s.acquire(r, long)
	})
}

func testBatch(s *suite) {
	ctx := s.Context()
	done, flight, conflict := s.ref("done"), s.ref("flight"), s.ref("conflict")
	s.complete(s.acquire(done, long), long, nil)
	flightTk := s.acquire(flight, long)
	s.claimFP(conflict, long, "A")

	free, dup, bad := s.ref("free"), s.ref("dup"), s.ref("")
	reqs := []dedupe.Item{{Ref: free}, {Ref: done}, {Ref: flight}, {Ref: conflict, Fingerprint: "B"}, {Ref: bad}, {Ref: dup}, {Ref: dup}}
	want := []dedupe.Outcome{dedupe.Acquired, dedupe.Suppressed, dedupe.Busy, dedupe.Reused, 0, dedupe.Acquired, dedupe.Busy}
	res, errs, err := s.store.Claim(ctx, reqs, long)
	if err != nil {
		s.Fatalf("Claim: %v", err)
	}
	if len(res) != len(reqs) || len(errs) != len(reqs) {
		s.Fatalf("Claim of %d answered %d results and %d errors", len(reqs), len(res), len(errs))
	}
	for i, w := range want {
		if w == 0 {
			if !errors.Is(errs[i], msgkey.ErrInvalid) {
				s.Errorf("Claim item %d (%q) error = %v, want msgkey.ErrInvalid", i, reqs[i].Ref, errs[i])
			}
			continue
		}
		if errs[i] != nil || res[i].Outcome != w {
			s.Errorf("Claim item %d (%q) = %v, %v; want %v", i, reqs[i].Ref, res[i].Outcome, errs[i], w)
		}
		s.checkResult(reqs[i].Ref, res[i], long)
	}

	tickets := []dedupe.Ticket{
		{Ref: free, Token: res[0].Token},
		{Ref: flight, Token: "bogus"},
		{Ref: dup, Token: res[5].Token},
		{Ref: bad, Token: "bogus"},
	}
	cerrs, err := s.store.Complete(ctx, tickets, long)
	if err != nil {
		s.Fatalf("Complete: %v", err)
	}
	for i, w := range []error{nil, dedupe.ErrLeaseLost, nil, msgkey.ErrInvalid} {
		if len(cerrs) != len(tickets) || !matches(cerrs[i], w) {
			s.Fatalf("Complete = %v, want item %d %v", cerrs, i, w)
		}
	}
	s.want(free, "", dedupe.Suppressed)
	s.want(dup, "", dedupe.Suppressed)
	s.want(flight, "", dedupe.Busy)

	r1, r2 := s.acquire(s.ref("r1"), long), s.acquire(s.ref("r2"), long)
	rerrs, err := s.store.Release(ctx, []dedupe.Ticket{
		r1, {Ref: r2.Ref, Token: "bogus"}, tickets[0], flightTk, {Ref: bad, Token: "bogus"},
	})
	if err != nil {
		s.Fatalf("Release: %v", err)
	}
	for i, w := range []error{nil, dedupe.ErrLeaseLost, dedupe.ErrLeaseLost, nil, msgkey.ErrInvalid} {
		if len(rerrs) != 5 || !matches(rerrs[i], w) {
			s.Fatalf("Release = %v, want item %d %v", rerrs, i, w)
		}
	}
	s.acquire(r1.Ref, long)
	s.want(r2.Ref, "", dedupe.Busy)
	s.want(free, "", dedupe.Suppressed)
	s.acquire(flight, long)

	s.Run("Empty", func(t *testing.T) {
		res, errs, err := s.store.Claim(ctx, nil, long)
		if len(res) != 0 || len(errs) != 0 || err != nil {
			t.Errorf("Claim(nil) = %v, %v, %v; want nothing", res, errs, err)
		}
		if errs, err := s.store.Complete(ctx, nil, long); len(errs) != 0 || err != nil {
			t.Errorf("Complete(nil) = %v, %v; want nothing", errs, err)
		}
		if errs, err := s.store.Release(ctx, nil); len(errs) != 0 || err != nil {
			t.Errorf("Release(nil) = %v, %v; want nothing", errs, err)
		}
	})
	// Large, and over five groups: on a Redis Cluster, five slots.
	s.Run("Large", func(t *testing.T) {
		s := s.sub(t)
		reqs := make([]dedupe.Item, 500)
		for i := range reqs {
			r := dedupe.Ref{Namespace: "dedupetest", Group: fmt.Sprint(s.id, i%5), Key: fmt.Sprint(i)}
			reqs[i] = dedupe.Item{Ref: r, Fingerprint: fmt.Sprint(i)}
		}
		res, errs, err := s.store.Claim(ctx, reqs, long)
		if err != nil {
			s.Fatalf("Claim: %v", err)
		}
		tickets := make([]dedupe.Ticket, len(res))
		for i, r := range res {
			if r.Outcome != dedupe.Acquired || errs[i] != nil {
				s.Fatalf("Claim item %d = %v, %v", i, r.Outcome, errs[i])
			}
			tickets[i] = dedupe.Ticket{Ref: reqs[i].Ref, Token: r.Token}
		}
		cerrs, err := s.store.Complete(ctx, tickets, long)
		if err != nil || slices.ContainsFunc(cerrs, func(e error) bool { return e != nil }) {
			s.Fatalf("Complete = %v, %v", cerrs, err)
		}
		res, _, err = s.store.Claim(ctx, reqs, long)
		if err != nil || slices.ContainsFunc(res, func(r dedupe.ClaimResult) bool { return r.Outcome != dedupe.Suppressed }) {
			s.Fatalf("Claim after completing: %v, err %v; want all done", res, err)
		}
	})
}

// testFailedBatch fails batch claims part-way and checks that every key
// such a batch could have taken can be claimed at once: the caller never
// learns the tokens of a failed batch, so a key it kept would stay blocked
// for a whole lease.
func testFailedBatch(s *suite) {
	// Some keys are done, so that a batch meets records it keeps as well
	// as keys it takes.
	// Batches of n keys, large enough to take a SQL store several
	// statements.
	const n, every = 600, 16
	var done []dedupe.Ref
	for i := 0; i < n; i += every {
		r := s.ref(fmt.Sprint("done", i))
		s.complete(s.acquire(r, long), long, nil)
		done = append(done, r)
	}
	s.Run("Deadline", func(t *testing.T) {
		s := s.sub(t)
		batch := func(prefix string) []dedupe.Item {
			reqs := make([]dedupe.Item, n)
			for i := range reqs {
				reqs[i] = dedupe.Item{Ref: s.ref(fmt.Sprint(prefix, i))}
				if i%every == 0 {
					reqs[i].Ref = done[i/every]
				}
			}
			return reqs
		}
		// check claims a prefix of a failed batch again: every key
		// is as it was before the batch.
		check := func(reqs []dedupe.Item) {
			s.Helper()
			res, errs, err := s.store.Claim(s.Context(), reqs, long)
			if err != nil {
				s.Fatalf("Claim after a failed batch: %v", err)
			}
			held := 0
			for i, r := range res {
				want := dedupe.Acquired
				if i%every == 0 {
					want = dedupe.Suppressed
				}
				if errs[i] != nil || r.Outcome != want {
					if held == 0 {
						s.Errorf("Claim of %q after a failed batch = %v, %v; want %v", reqs[i].Ref, r.Outcome, errs[i], want)
					}
					held++
				}
			}
			if held > 1 {
				s.Errorf("... and %d more of %d keys", held-1, len(reqs))
			}
		}
		failByDeadline(s, batch, check)
	})
}

// failByDeadline claims batches whose contexts expire at fractions of the
// time a whole batch takes, so that most end while the store is part-way
// through them.
func failByDeadline(s *suite, batch func(string) []dedupe.Item, check func([]dedupe.Item)) {
	var took time.Duration
	for i := range 2 { // the first may prepare what the second reuses
		start := time.Now()
		if _, _, err := s.store.Claim(s.Context(), batch(fmt.Sprint("warm", i, "-")), long); err != nil {
			s.Fatalf("Claim: %v", err)
		}
		took = time.Since(start)
	}
	const steps = 6
	failed := 0
	for i := 1; i < steps; i++ {
		reqs := batch(fmt.Sprint("deadline", i, "-"))
		ctx, cancel := context.WithTimeout(s.Context(), took*time.Duration(i)/steps)
		_, _, err := s.store.Claim(ctx, reqs, long)
		cancel()
		if err == nil {
			continue
		}
		if isSentinel(err) {
			s.Fatalf("Claim past its deadline = %v, want a plain error", err)
		}
		failed++
		check(reqs)
	}
	s.Logf("%d of %d batches ran past their deadline; a whole batch took %v", failed, steps-1, took)
}

// testDurations checks that non-positive leases and retentions are refused
// and change nothing.
func testDurations(s *suite) {
	r := s.ref("k")
	for _, d := range []time.Duration{0, -time.Second} {
		res, err := testkit.Claim(s.Context(), s.store, dedupe.Item{Ref: r}, d)
		if err == nil || isSentinel(err) {
			s.Errorf("Claim with lease %v = %v, %v; want a plain error", d, res.Outcome, err)
		}
	}
	tk := s.acquire(r, long)
	for _, d := range []time.Duration{0, -time.Second} {
		if err := testkit.Complete(s.Context(), s.store, tk, d); err == nil || isSentinel(err) {
			s.Errorf("Complete with retention %v = %v, want a plain error", d, err)
		}
		if err := s.store.Extend(s.Context(), tk, d); err == nil || isSentinel(err) {
			s.Errorf("Extend with lease %v = %v, want a plain error", d, err)
		}
	}
	s.want(r, "", dedupe.Busy)
	s.complete(tk, long, nil)
}

// testCancelledContext checks that a call whose context is done fails with
// the context's error and changes nothing.
func testCancelledContext(s *suite) {
	cancelled, cancel := context.WithCancel(s.Context())
	cancel()
	expired, cancel2 := context.WithDeadline(s.Context(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, c := range []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"Cancelled", cancelled, context.Canceled},
		{"DeadlineExceeded", expired, context.DeadlineExceeded},
	} {
		s.Run(c.name, func(t *testing.T) {
			s := s.sub(t)
			free, owned := s.ref("free"), s.ref("owned")
			tk := s.acquire(owned, long)
			check := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, c.want) || isSentinel(err) {
					t.Errorf("%s = %v, want %v", what, err, c.want)
				}
			}
			_, err := testkit.Claim(c.ctx, s.store, dedupe.Item{Ref: free}, long)
			check("Claim", err)
			check("Complete", testkit.Complete(c.ctx, s.store, tk, long))
			check("Extend", s.store.Extend(c.ctx, tk, time.Millisecond))
			check("Release", testkit.Release(c.ctx, s.store, tk))
			_, _, err = s.store.Claim(c.ctx, []dedupe.Item{{Ref: free}}, long)
			check("Claim", err)
			_, err = s.store.Complete(c.ctx, []dedupe.Ticket{tk}, long)
			check("Complete", err)
			_, err = s.store.Release(c.ctx, []dedupe.Ticket{tk})
			check("Release", err)

			s.acquire(free, long)
			s.want(owned, "", dedupe.Busy)
			s.complete(tk, long, nil)
		})
	}
}

// testFaults fails calls on their way to the store or on their way back and
// checks that the caller gets a plain error and that the store records
// nothing wrongly: no key is ever done that was not completed, and every
// write can be retried with the same token.
func testFaults(s *suite) {
	type env struct {
		*suite
		fs *testkit.FaultStore
	}
	setup := func(t *testing.T) env {
		sub := s.sub(t)
		fs := testkit.NewFaultStore(s.store)
		sub.store = fs
		return env{sub, fs}
	}
	injected := func(t *testing.T, what string, err error) {
		t.Helper()
		if !errors.Is(err, testkit.ErrInjected) || isSentinel(err) {
			t.Fatalf("%s = %v, want the injected fault", what, err)
		}
	}
	s.Run("ClaimBefore", func(t *testing.T) {
		e := setup(t)
		r := e.ref("k")
		e.fs.Inject(testkit.Fault{Ops: testkit.OpClaim, Nth: 1})
		_, err := testkit.Claim(e.Context(), e.fs, dedupe.Item{Ref: r}, long)
		injected(t, "Claim", err)
		e.acquire(r, long)
	})
	s.Run("ClaimAfter", func(t *testing.T) {
		e := setup(t)
		r := e.ref("k")
		e.fs.Inject(testkit.Fault{Ops: testkit.OpClaim, Nth: 1, After: true})
		sent := time.Now()
		_, err := testkit.Claim(e.Context(), e.fs, dedupe.Item{Ref: r}, shortLease)
		injected(t, "Claim", err)
		// The lost claim holds the key until its lease ends, never longer.
		if res := e.claimFP(r, long, ""); res.Outcome != dedupe.Busy {
			if !e.stalled(sent, shortLease, "Claim after a lost claim = "+res.Outcome.String()) {
				t.Fatalf("Claim after a lost claim = %v, want in flight", res.Outcome)
			}
			return
		}
		e.expire()
		e.acquire(r, long)
	})
	s.Run("CompleteBefore", func(t *testing.T) {
		e := setup(t)
		r := e.ref("k")
		tk := e.acquire(r, long)
		e.fs.Inject(testkit.Fault{Ops: testkit.OpComplete, Nth: 1})
		injected(t, "Complete", testkit.Complete(e.Context(), e.fs, tk, long))
		e.want(r, "", dedupe.Busy)
		e.complete(tk, long, nil)
		e.want(r, "", dedupe.Suppressed)
	})
	s.Run("CompleteAfter", func(t *testing.T) {
		e := setup(t)
		r := e.ref("k")
		tk := e.acquire(r, long)
		e.fs.Inject(testkit.Fault{Ops: testkit.OpComplete, Nth: 1, After: true})
		injected(t, "Complete", testkit.Complete(e.Context(), e.fs, tk, long))
		e.want(r, "", dedupe.Suppressed)
		e.complete(tk, long, nil)
	})
	s.Run("ReleaseBefore", func(t *testing.T) {
		e := setup(t)
		r := e.ref("k")
		tk := e.acquire(r, long)
		e.fs.Inject(testkit.Fault{Ops: testkit.OpRelease, Nth: 1})
		injected(t, "Release", testkit.Release(e.Context(), e.fs, tk))
		e.want(r, "", dedupe.Busy)
		e.release(tk, nil)
		e.acquire(r, long)
	})
	s.Run("ReleaseAfter", func(t *testing.T) {
		e := setup(t)
		r := e.ref("k")
		tk := e.acquire(r, long)
		e.fs.Inject(testkit.Fault{Ops: testkit.OpRelease, Nth: 1, After: true})
		injected(t, "Release", testkit.Release(e.Context(), e.fs, tk))
		e.release(tk, dedupe.ErrLeaseLost)
		e.acquire(r, long)
	})
	s.Run("ExtendAfter", func(t *testing.T) {
		e := setup(t)
		r := e.ref("k")
		tk := e.acquire(r, long)
		e.fs.Inject(testkit.Fault{Ops: testkit.OpExtend, Nth: 1, After: true})
		injected(t, "Extend", e.fs.Extend(e.Context(), tk, long))
		e.extend(tk, long, nil)
		e.complete(tk, long, nil)
	})
	s.Run("BatchAfter", func(t *testing.T) {
		e := setup(t)
		reqs := []dedupe.Item{{Ref: e.ref("a")}, {Ref: e.ref("b")}}
		e.fs.Inject(testkit.Fault{Ops: testkit.OpClaim, Nth: 1, After: true})
		_, _, err := e.fs.Claim(e.Context(), reqs, long)
		injected(t, "Claim", err)
		for _, r := range reqs {
			e.want(r.Ref, "", dedupe.Busy)
		}

		var tickets []dedupe.Ticket
		for _, k := range []string{"c", "d"} {
			tickets = append(tickets, e.acquire(e.ref(k), long))
		}
		e.fs.Inject(testkit.Fault{Ops: testkit.OpComplete, Nth: 1, After: true})
		_, err = e.fs.Complete(e.Context(), tickets, long)
		injected(t, "Complete", err)
		errs, err := e.fs.Complete(e.Context(), tickets, long)
		if err != nil || slices.ContainsFunc(errs, func(e error) bool { return e != nil }) {
			t.Fatalf("Complete retry = %v, %v; want success", errs, err)
		}
		for _, tk := range tickets {
			e.want(tk.Ref, "", dedupe.Suppressed)
		}
	})
}

// hostile holds keys that are syntax somewhere: SQL, Lua, Redis patterns and
// hash tags, LIKE and glob wildcards, path and format strings.
var hostile = []string{
	`'`, `"`, "`", `\`, `\'`, `''`, `' OR '1'='1`, `'; DROP TABLE dedupe; --`, `"; DELETE FROM x; --`,
	`%`, `_`, `a%`, `a_`, `%s%d%n`, `*`, `a*`, `?`, `a?`, `[ab]`, `[^a]`, `h[ae]llo`,
	`{`, `}`, `{}`, `{a}`, `}{`, `:`, `::`, `a:b`, `a:*`, `/`, `../..`, `.`, `$1`, `\0`,
	`]]`, `[[`, `]]..redis.call('FLUSHALL')..[[`, `redis.call("DEL", KEYS[1])`, `--[[`, `#`,
	`\n`, `\r\n`, `null`, `NULL`, `nil`, `0`, `-1`, `true`, `🙂`, `中文`, `é`, ` `, ` a `,
	`$(rm -rf /)`, `<script>`, `&amp;`, `+`, `~`, `^`, `$`, `|`, `;`, `,`,
}

// nearMiss maps a hostile key to keys a pattern or a loose comparison would
// confuse with it.
var nearMiss = map[string][]string{
	`a*`:          {"a", "ab", "abc"},
	`*`:           {"x"},
	`a?`:          {"ab"},
	`?`:           {"y"},
	`a%`:          {"a", "ab"},
	`%`:           {"z"},
	`a_`:          {"ab"},
	`_`:           {"w"},
	`[ab]`:        {"a", "b"},
	`h[ae]llo`:    {"hallo", "hello"},
	`a:*`:         {"a:b"},
	`{a}`:         {"a"},
	` a `:         {"a", " a", "a "},
	`' OR '1'='1`: {"x' OR '1'='1"},
}

func testHostileKeys(s *suite) {
	for _, key := range hostile {
		r := s.ref(key)
		s.complete(s.acquire(r, long), long, nil)
	}
	for _, key := range hostile {
		s.want(s.ref(key), "", dedupe.Suppressed)
	}
	// Read back, a record holds the very bytes claimed, never interpreted.
	in, _ := s.store.(dedupe.Inspector)
	if in != nil {
		s.listKeys(in, dedupe.ListRequest{Namespace: "dedupetest", Group: s.id}, hostile)
	}
	claimed := map[string]bool{}
	for key, misses := range nearMiss {
		for _, m := range misses {
			if slices.Contains(hostile, m) || claimed[m] {
				continue
			}
			claimed[m] = true
			if res := s.claimFP(s.ref(m), long, ""); res.Outcome != dedupe.Acquired {
				s.Errorf("Claim(%q) after completing %q = %v, want acquired", m, key, res.Outcome)
			}
		}
	}
	// Hostile groups and namespaces too.
	for _, part := range []string{`*`, `{x}`, `a:b`, `'`, `%`, `]]`} {
		for _, r := range []dedupe.Ref{
			{Namespace: s.id, Group: part, Key: "k"},
			{Namespace: s.id + part, Group: "g", Key: "k"},
		} {
			s.complete(s.acquire(r, long), long, nil)
			s.want(r, "", dedupe.Suppressed)
			if in != nil {
				if recs := s.listKeys(in, dedupe.ListRequest{Namespace: r.Namespace, Group: r.Group}, []string{"k"}); len(recs) > 0 && recs[0].Ref != r {
					s.Errorf("List(%q, %q) = %q, want the ref claimed", r.Namespace, r.Group, recs[0].Ref)
				}
			}
		}
	}
	s.acquire(dedupe.Ref{Namespace: s.id, Group: "x", Key: "k"}, long)
	s.acquire(dedupe.Ref{Namespace: s.id, Group: "{x}y", Key: "k"}, long)

	// The longest parts fit, in bytes, however many characters they are.
	for _, r := range []dedupe.Ref{
		s.ref(strings.Repeat("k", msgkey.MaxLen)),
		s.ref(strings.Repeat("🙂", msgkey.MaxLen/4) + strings.Repeat("k", msgkey.MaxLen%4)),
		s.ref(strings.Repeat("é", msgkey.MaxLen/2) + strings.Repeat("k", msgkey.MaxLen%2)),
		{Namespace: s.id, Group: strings.Repeat("g", dedupekit.MaxGroupLen-len(s.id)) + s.id, Key: "k"},
		{Namespace: s.id + strings.Repeat("n", dedupekit.MaxNamespaceLen-len(s.id)), Group: "g", Key: "k"},
	} {
		s.complete(s.acquire(r, long), long, nil)
		s.want(r, "", dedupe.Suppressed)
	}
}

// invalidRefs fail dedupe.Ref.Validate.
func (s *suite) invalidRefs() []dedupe.Ref {
	bad := []string{
		"", strings.Repeat("k", msgkey.MaxLen+1), strings.Repeat("k", 10<<10),
		"\xff", "a\xc3", "\xed\xa0\x80", "a\x00b", "\x00", "a\nb", "\r", "\t", "\x1b[31m", "\x7f", "\u0085",
		strings.Repeat("🙂", msgkey.MaxLen/4+1),
	}
	var refs []dedupe.Ref
	for _, k := range bad {
		refs = append(refs, s.ref(k))
	}
	return append(refs,
		dedupe.Ref{Namespace: s.id, Group: "", Key: "k"},
		dedupe.Ref{Namespace: s.id, Group: "g\n", Key: "k"},
		dedupe.Ref{Namespace: s.id, Group: strings.Repeat("g", dedupekit.MaxGroupLen+1), Key: "k"},
		dedupe.Ref{Namespace: s.id + strings.Repeat("n", dedupekit.MaxNamespaceLen), Group: "g", Key: "k"},
		dedupe.Ref{Namespace: s.id + "\xff", Group: "g", Key: "k"},
	)
}

func testInvalidKeys(s *suite) {
	ctx := s.Context()
	refs := s.invalidRefs()
	for _, r := range refs {
		if dedupekit.CheckRef(r.Namespace, r.Group, r.Key) == nil {
			s.Fatalf("suite bug: %q is valid", r)
		}
		_, err := testkit.Claim(ctx, s.store, dedupe.Item{Ref: r}, long)
		tk := dedupe.Ticket{Ref: r, Token: "bogus"}
		for what, err := range map[string]error{
			"Claim":    err,
			"Complete": testkit.Complete(ctx, s.store, tk, long),
			"Release":  testkit.Release(ctx, s.store, tk),
			"Extend":   s.store.Extend(ctx, tk, long),
		} {
			if !errors.Is(err, msgkey.ErrInvalid) {
				s.Errorf("%s(%.60q) = %v, want msgkey.ErrInvalid", what, r, err)
			}
		}
	}
	// In a batch the bad items fail alone.
	reqs := []dedupe.Item{{Ref: s.ref("good")}}
	for _, r := range refs {
		reqs = append(reqs, dedupe.Item{Ref: r})
	}
	res, errs, err := s.store.Claim(ctx, reqs, long)
	if err != nil {
		s.Fatalf("Claim: %v", err)
	}
	if res[0].Outcome != dedupe.Acquired || errs[0] != nil {
		s.Errorf("Claim item 0 = %v, %v; want acquired", res[0].Outcome, errs[0])
	}
	for i := 1; i < len(reqs); i++ {
		if !errors.Is(errs[i], msgkey.ErrInvalid) {
			s.Errorf("Claim item %d (%.60q) = %v, want msgkey.ErrInvalid", i, reqs[i].Ref, errs[i])
		}
	}
	// Nothing was recorded for a truncated or cleaned-up bad key either.
	for _, k := range []string{"a", "ab", "k", strings.Repeat("k", msgkey.MaxLen)} {
		s.acquire(s.ref(k), long)
	}
}

// testLostAnswer loses the answer to a claim after the server ran it, as a
// dropped connection does: the client sends the claim again, with the same
// token, and it must take the record it wrote as its own, not answer busy
// to its own caller and block the key for a whole lease.
func testLostAnswer(s *suite) {
	if s.f.LostAnswer == nil {
		s.Skip("Features.LostAnswer not set")
	}
	store, lose := s.f.LostAnswer(s.T)
	ctx := s.Context()
	for _, tc := range []struct {
		name   string
		groups []string // a batch spanning groups is a pipeline on Redis
		// fresh keys, claimed after held keys were claimed by another
		// owner
		fresh, held []string
	}{
		{"Claim", []string{"g"}, []string{"a"}, nil},
		{"ClaimMany", []string{"g"}, []string{"a", "b", "c"}, nil},
		{"ClaimManyWithHeld", []string{"g"}, []string{"a", "c"}, []string{"b"}},
		{"ClaimManyGroups", []string{"g1", "g2"}, []string{"a", "b"}, nil},
	} {
		ns := s.id + tc.name
		var reqs, warm []dedupe.Item
		for _, g := range tc.groups {
			for _, k := range tc.held {
				r := dedupe.Ref{Namespace: ns, Group: g, Key: k}
				if res, err := testkit.Claim(ctx, store, dedupe.Item{Ref: r}, long); err != nil || res.Outcome != dedupe.Acquired {
					s.Fatalf("%s: Claim(%q) = %v, %v; want acquired", tc.name, r, res.Outcome, err)
				}
				reqs = append(reqs, dedupe.Item{Ref: r})
			}
			for _, k := range tc.fresh {
				reqs = append(reqs, dedupe.Item{Ref: dedupe.Ref{Namespace: ns, Group: g, Key: k}})
				// A claim of other keys first loads what the store
				// loads on first use and leaves a connection in the
				// pool, so the claim that loses its answer runs as is.
				warm = append(warm, dedupe.Item{Ref: dedupe.Ref{Namespace: ns + "warm", Group: g, Key: k}})
			}
		}
		if _, _, err := store.Claim(ctx, warm, long); err != nil {
			s.Fatal(err)
		}
		dropped := lose(ns)
		res, errs, err := store.Claim(ctx, reqs, long)
		if !dropped() {
			s.Fatalf("%s: no answer was lost", tc.name)
		}
		if err != nil {
			s.Fatalf("%s: claim whose answer was lost: %v", tc.name, err)
		}
		for i, r := range res {
			want := dedupe.Acquired
			if slices.Contains(tc.held, reqs[i].Ref.Key) {
				want = dedupe.Busy
			}
			if errs[i] != nil || r.Outcome != want {
				s.Fatalf("%s: claim %q whose answer was lost once = %v, %v; want %v", tc.name, reqs[i].Ref, r.Outcome, errs[i], want)
			}
			if want != dedupe.Acquired {
				continue
			}
			if err := testkit.Complete(ctx, store, dedupe.Ticket{Ref: reqs[i].Ref, Token: r.Token}, long); err != nil {
				s.Fatalf("%s: Complete(%q) with the token the claim answered: %v", tc.name, reqs[i].Ref, err)
			}
			// Another claimant finds the key done.
			if res, err := testkit.Claim(ctx, store, reqs[i], long); err != nil || res.Outcome != dedupe.Suppressed {
				s.Errorf("%s: Claim(%q) after completing = %v, %v; want done", tc.name, reqs[i].Ref, res.Outcome, err)
			}
		}
	}
}

// testUnreachable checks that a store whose server cannot be reached
// answers every call with a plain error naming the call and the address,
// never a sentinel: a store connects on its first call, so this is where a
// wrong address is noticed.
func testUnreachable(s *suite) {
	if s.f.Unreachable == nil {
		s.Skip("Features.Unreachable not set")
	}
	st, pkg, addr := s.f.Unreachable(s.T)
	ctx, r := s.Context(), s.ref("k")
	tk := dedupe.Ticket{Ref: r, Token: "t"}
	_, claimErr := testkit.Claim(ctx, st, dedupe.Item{Ref: r}, time.Second)
	_, _, batchErr := st.Claim(ctx, []dedupe.Item{{Ref: r}, {Ref: s.ref("k2")}}, time.Second)
	calls := map[string]error{
		"claim":            claimErr,
		"claim batch of 2": batchErr,
		"complete":         testkit.Complete(ctx, st, tk, time.Second),
		"release":          testkit.Release(ctx, st, tk),
		"extend":           st.Extend(ctx, tk, time.Second),
	}
	// The Inspector's calls are what `idemq dedupe` shows an operator.
	if in, ok := st.(dedupe.Inspector); ok {
		_, _, calls["get"] = in.Get(ctx, r)
		_, _, calls["list"] = in.List(ctx, dedupe.ListRequest{Namespace: r.Namespace, Group: r.Group})
		_, calls["stats"] = in.Stats(ctx, r.Namespace, r.Group)
		_, calls["forget"] = in.Forget(ctx, r)
	}
	for what, err := range calls {
		if err == nil || isSentinel(err) || !strings.HasPrefix(err.Error(), pkg+": "+what) || !strings.Contains(err.Error(), addr) {
			s.Errorf("%s = %v, want a plain error starting %q and naming %s", what, err, pkg+": "+what, addr)
		}
	}
}

// testVerbatim checks that keys are compared byte for byte: no case folding,
// no trailing-space padding, no Unicode normalisation.
func testVerbatim(s *suite) {
	for i, pair := range [][2]string{
		{"a", "A"},
		{"a", "a "},
		{"a", " a"},
		{"é", "e\u0301"},
		{"ß", "ss"},
		{"ａ", "a"},
		{"a", "a\u200b"},
		{"İ", "i"},
		{"1", "01"},
		{"a-b", "a_b"},
	} {
		group := fmt.Sprint(s.id, "-", i)
		r0 := dedupe.Ref{Namespace: "dedupetest", Group: group, Key: pair[0]}
		r1 := dedupe.Ref{Namespace: "dedupetest", Group: group, Key: pair[1]}
		s.acquire(r0, long)
		if res := s.claimFP(r1, long, ""); res.Outcome != dedupe.Acquired {
			s.Errorf("Claim(%q) after claiming %q = %v, want acquired", pair[1], pair[0], res.Outcome)
		}
	}
}

// traceparents are W3C trace contexts, as a consumer names its runs.
const (
	traceA = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traceB = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
)

func testTrace(s *suite) {
	// wantTrace claims ref, done, with fingerprint fp, and checks the
	// trace answered, where the store keeps traces.
	wantTrace := func(ref dedupe.Ref, fp, want string) {
		s.Helper()
		res := s.want(ref, fp, dedupe.Suppressed)
		if !s.f.KeepsTrace {
			return
		}
		if res.Trace != want {
			s.Errorf("Claim(%q) of a key done = trace %q, want %q", ref, res.Trace, want)
		}
		if in, ok := s.store.(dedupe.Inspector); ok {
			rec, found, err := in.Get(s.Context(), ref)
			if err != nil || !found || rec.Trace != want {
				s.Errorf("Get(%q) = trace %q, found %v, %v; want trace %q", ref, rec.Trace, found, err, want)
			}
		}
	}
	fp := strings.Repeat("f", 16)
	r := s.ref("traced")
	res := s.claimFP(r, long, fp)
	if res.Outcome != dedupe.Acquired {
		s.Fatalf("Claim(%q) = %v, want acquired", r, res.Outcome)
	}
	s.complete(dedupe.Ticket{Ref: r, Token: res.Token, Trace: traceA}, long, nil)
	wantTrace(r, fp, traceA)
	wantTrace(r, "", traceA)
	// The trace follows the fingerprint in some records: another payload
	// must still be told apart, and one of another kind not compared.
	s.want(r, strings.Repeat("e", 16), dedupe.Reused)
	wantTrace(r, strings.Repeat("f", 64), traceA)
	// A retried completion keeps its own trace.
	s.complete(dedupe.Ticket{Ref: r, Token: res.Token, Trace: traceB}, long, nil)
	wantTrace(r, fp, traceB)
	s.complete(dedupe.Ticket{Ref: r, Token: res.Token}, long, nil)
	wantTrace(r, fp, "")

	// Traces that are not kept, which never fail a completion; a held key
	// has none; Release and Extend ignore it.
	for name, tr := range map[string]string{
		"none":    "",
		"newline": traceA + "\n" + traceB,
		"space":   "a b",
		"long":    strings.Repeat("t", 129),
		"utf8":    "ü",
	} {
		r := s.ref("untraced-" + name)
		tk := s.acquire(r, long)
		tk.Trace = traceA
		s.extend(tk, long, nil)
		s.want(r, "", dedupe.Busy)
		tk.Trace = tr
		s.complete(tk, long, nil)
		wantTrace(r, "", "")
	}
	r = s.ref("released")
	tk := s.acquire(r, long)
	tk.Trace = traceA
	s.release(tk, nil)
	tk = s.acquire(r, long)
	s.complete(tk, long, nil)
	wantTrace(r, "", "")

	// A batch whose tickets have traces and not, across groups.
	refs := []dedupe.Ref{s.ref("b1"), s.ref("b2"), {Namespace: "dedupetest", Group: s.id + "-other", Key: "b3"}}
	ts := make([]dedupe.Ticket, len(refs))
	for i, r := range refs {
		ts[i] = s.acquire(r, long)
	}
	ts[0].Trace, ts[2].Trace = traceA, traceB
	errs, err := s.store.Complete(s.Context(), ts, long)
	if err != nil || slices.ContainsFunc(errs, func(e error) bool { return e != nil }) {
		s.Fatalf("Complete of a batch with traces = %v, %v", errs, err)
	}
	wantTrace(refs[0], "", traceA)
	wantTrace(refs[1], "", "")
	wantTrace(refs[2], "", traceB)
}
