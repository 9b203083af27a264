package dedupe_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/dedupetest"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
)

// tripStore is memdedupe that logs its round trips — every call is one —
// and, while held, keeps each round trip waiting until the test lets it go.
type tripStore struct {
	dedupe.Store

	mu      sync.Mutex
	trips   []tripEntry
	held    bool
	started chan heldTrip // held round trips, once they wait
}

// heldTrip is a round trip waiting to be let go.
type heldTrip struct {
	tripEntry
	gate chan struct{} // closed to let it go
}

// open lets the round trip go on.
func (h heldTrip) open() { close(h.gate) }

// tripEntry is a round trip's log entry.
type tripEntry struct {
	op       string
	keys     []string
	arg      time.Duration // retention of completions
	deadline time.Time     // of its context; zero if none
	err      error         // ended by its context
}

var _ dedupe.Store = (*tripStore)(nil)

func newTripStore() *tripStore {
	return &tripStore{
		Store:   memdedupe.New(memdedupe.Config{}),
		started: make(chan heldTrip, 1024),
	}
}

// hold makes every later round trip wait until it is let go.
func (s *tripStore) hold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = true
}

// unhold makes later round trips go on at once.
func (s *tripStore) unhold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = false
}

// let waits for the next held round trip, lets it go on and returns its
// log entry.
func (s *tripStore) let(t *testing.T) tripEntry {
	t.Helper()
	h := s.wait(t)
	h.open()
	return h.tripEntry
}

// wait waits for the next held round trip to start.
func (s *tripStore) wait(t *testing.T) heldTrip {
	t.Helper()
	select {
	case h := <-s.started:
		return h
	case <-time.After(10 * time.Second):
		t.Fatal("no round trip started")
	}
	return heldTrip{}
}

// log returns the round trips so far, as "op:key,key".
func (s *tripStore) log() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, tr := range s.trips {
		out = append(out, tr.String())
	}
	return out
}

func (tr tripEntry) String() string {
	s := tr.op + ":" + fmt.Sprint(tr.keys)
	if tr.arg != 0 {
		s += "@" + tr.arg.String()
	}
	return s
}

// trip logs a round trip and, if held, waits to be let go.
func (s *tripStore) trip(ctx context.Context, op string, arg time.Duration, refs ...dedupe.Ref) error {
	tr := tripEntry{op: op, arg: arg}
	tr.deadline, _ = ctx.Deadline()
	for _, r := range refs {
		tr.keys = append(tr.keys, r.Key)
	}
	s.mu.Lock()
	i := len(s.trips)
	s.trips = append(s.trips, tr)
	wait := s.held
	s.mu.Unlock()
	if !wait {
		return nil
	}
	h := heldTrip{tr, make(chan struct{})}
	s.started <- h
	select {
	case <-h.gate:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		s.trips[i].err = ctx.Err()
		s.mu.Unlock()
		return ctx.Err()
	}
}

// ended returns the errors of the round trips their contexts ended.
func (s *tripStore) ended() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, tr := range s.trips {
		if tr.err != nil {
			errs = append(errs, tr.err)
		}
	}
	return errs
}

// The store refuses non-positive durations before any round trip, as
// the real ones do.

func (s *tripStore) Extend(ctx context.Context, t dedupe.Ticket, lease time.Duration) error {
	if err := s.trip(ctx, "Extend", 0, t.Ref); err != nil {
		return err
	}
	return s.Store.Extend(ctx, t, lease)
}

func (s *tripStore) Claim(ctx context.Context, reqs []dedupe.Item, lease time.Duration) ([]dedupe.ClaimResult, []error, error) {
	if lease <= 0 {
		return s.Store.Claim(ctx, reqs, lease)
	}
	refs := make([]dedupe.Ref, len(reqs))
	for i, r := range reqs {
		refs[i] = r.Ref
	}
	if err := s.trip(ctx, "Claim", 0, refs...); err != nil {
		return nil, nil, err
	}
	return s.Store.Claim(ctx, reqs, lease)
}

func (s *tripStore) Complete(ctx context.Context, ts []dedupe.Ticket, retention time.Duration) ([]error, error) {
	if retention <= 0 {
		return s.Store.Complete(ctx, ts, retention)
	}
	if err := s.trip(ctx, "Complete", retention, ticketRefs(ts)...); err != nil {
		return nil, err
	}
	return s.Store.Complete(ctx, ts, retention)
}

func (s *tripStore) Release(ctx context.Context, ts []dedupe.Ticket) ([]error, error) {
	if err := s.trip(ctx, "Release", 0, ticketRefs(ts)...); err != nil {
		return nil, err
	}
	return s.Store.Release(ctx, ts)
}

func ticketRefs(ts []dedupe.Ticket) []dedupe.Ref {
	refs := make([]dedupe.Ref, len(ts))
	for i, t := range ts {
		refs[i] = t.Ref
	}
	return refs
}

// gcRef is key k of the group commit tests.
func gcRef(k string) dedupe.Ref { return dedupe.Ref{Namespace: "gc", Group: "g", Key: k} }

func gcClaim(k string) dedupe.Item {
	return dedupe.Item{Ref: gcRef(k)}
}

// gcQueued waits until the group-commit store g has n calls queued of the
// kind pick picks from dedupe.GroupCommitQueued's answer.
func gcQueued(t *testing.T, g dedupe.Store, pick func(claims, completions, releases int) int, n int) {
	t.Helper()
	testkit.WaitFor(t, fmt.Sprintf("%d calls queued", n), func() bool { return pick(dedupe.GroupCommitQueued(g)) == n })
}

// gcQueuedOr waits until g has a claim queued or returned is closed.
func gcQueuedOr(t *testing.T, g dedupe.Store, returned <-chan struct{}) {
	t.Helper()
	testkit.WaitFor(t, "the claim queued or returned", func() bool {
		select {
		case <-returned:
			return true
		default:
			c, _, _ := dedupe.GroupCommitQueued(g)
			return c == 1
		}
	})
}

func gcClaims(c, _, _ int) int      { return c }
func gcCompletions(_, c, _ int) int { return c }
func gcReleases(_, _, r int) int    { return r }

// gcEnv is a group-commit store over a tripStore.
type gcEnv struct {
	s *tripStore
	g dedupe.Store
}

func newGCEnv() gcEnv {
	s := newTripStore()
	return gcEnv{s, dedupe.WithGroupCommit(s)}
}

// gcAsync runs f on a goroutine and returns a channel closed when it has
// returned.
func gcAsync(f func()) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	return done
}

// blockers are the keys of the calls gcEnv.block holds.
func blockers(op string) []string {
	var ks []string
	for i := range dedupe.GroupCommitMaxInFlight {
		ks = append(ks, fmt.Sprintf("blocker-%s-%d", op, i))
	}
	return ks
}

// block starts as many lone calls of the kind op names as may be in flight,
// each on a key of its own (see blockers) and held in its round trip, so
// that later calls of that kind queue. The function it returns lets the
// round trips go and waits for the calls to return.
func (e gcEnv) block(t *testing.T, op string) (unblock func()) {
	t.Helper()
	ks := blockers(op)
	tks := make([]dedupe.Ticket, len(ks))
	if op != "Claim" {
		for i, k := range ks {
			tks[i] = holdKey(t, e.g, gcRef(k), "", time.Hour)
		}
	}
	e.s.hold()
	ctx := t.Context()
	var (
		held []heldTrip
		done []<-chan struct{}
	)
	for i, k := range ks {
		done = append(done, gcAsync(func() {
			var err error
			switch op {
			case "Claim":
				_, err = testkit.Claim(ctx, e.g, gcClaim(k), time.Hour)
			case "Complete":
				err = testkit.Complete(ctx, e.g, tks[i], time.Hour)
			case "Release":
				err = testkit.Release(ctx, e.g, tks[i])
			}
			if err != nil {
				t.Errorf("blocking %s: %v", op, err)
			}
		}))
		h := e.s.wait(t)
		if want := fmt.Sprintf("%s:[%s]", op, k); h.op != op || fmt.Sprintf("%s:%v", h.op, h.keys) != want {
			t.Fatalf("blocking round trip is %v, want %s", h.tripEntry, want)
		}
		held = append(held, h)
	}
	return func() {
		for _, h := range held {
			h.open()
		}
		for _, d := range done {
			<-d
		}
	}
}

// TestGroupCommitLone checks that a call with nothing in flight is sent at
// once, as the call it is (the first claim of each row alone).
func TestGroupCommitLone(t *testing.T) {
	tests := []struct {
		name string
		do   func(t *testing.T, g dedupe.Store) error
		want []string
	}{
		{"Claim", func(t *testing.T, g dedupe.Store) error {
			_, _, err := g.Claim(t.Context(), []dedupe.Item{gcClaim("a"), gcClaim("b")}, time.Hour)
			return err
		}, []string{"Claim:[a b]"}},
		{"Complete", func(t *testing.T, g dedupe.Store) error {
			return testkit.Complete(t.Context(), g, holdKey(t, g, gcRef("a"), "", time.Hour), time.Hour)
		}, []string{"Claim:[a]", "Complete:[a]@1h0m0s"}},
		{"Release", func(t *testing.T, g dedupe.Store) error {
			return testkit.Release(t.Context(), g, holdKey(t, g, gcRef("a"), "", time.Hour))
		}, []string{"Claim:[a]", "Release:[a]"}},
		{"Extend", func(t *testing.T, g dedupe.Store) error {
			return g.Extend(t.Context(), holdKey(t, g, gcRef("a"), "", time.Hour), time.Hour)
		}, []string{"Claim:[a]", "Extend:[a]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newGCEnv()
			if err := tc.do(t, e.g); err != nil {
				t.Fatal(err)
			}
			if got := e.s.log(); !slices.Equal(got, tc.want) {
				t.Errorf("round trips %q, want %q", got, tc.want)
			}
		})
	}
}

// TestGroupCommitCoalesces checks that calls arriving while a round trip is
// in flight go together in the next.
func TestGroupCommitCoalesces(t *testing.T) {
	const n = 8
	keys := func(prefix string, n int) []string {
		var ks []string
		for i := range n {
			ks = append(ks, fmt.Sprint(prefix, i))
		}
		return ks
	}
	tests := []struct {
		op   string
		pick func(int, int, int) int
	}{
		{"Claim", gcClaims},
		{"Complete", gcCompletions},
		{"Release", gcReleases},
	}
	for _, tc := range tests {
		t.Run(tc.op, func(t *testing.T) {
			e := newGCEnv()
			ks := keys("k", n)
			tks := make(map[string]dedupe.Ticket)
			if tc.op != "Claim" {
				for _, k := range ks {
					tks[k] = holdKey(t, e.g, gcRef(k), "", time.Hour)
				}
			}
			unblock := e.block(t, tc.op)
			ctx := t.Context()
			var wg sync.WaitGroup
			for i, k := range ks {
				wg.Go(func() {
					var err error
					switch {
					case tc.op == "Claim":
						var res []dedupe.ClaimResult
						var errs []error
						res, errs, err = e.g.Claim(ctx, []dedupe.Item{gcClaim(k)}, time.Hour)
						if err == nil && (errs[0] != nil || res[0].Outcome != dedupe.Acquired) {
							err = fmt.Errorf("item = %v, %v", res[0].Outcome, errs[0])
						}
					case tc.op == "Complete":
						err = testkit.Complete(ctx, e.g, tks[k], time.Hour)
					default:
						err = testkit.Release(ctx, e.g, tks[k])
					}
					if err != nil {
						t.Errorf("%s(%q): %v", tc.op, k, err)
					}
				})
				// One at a time, so that the batch's order is known.
				gcQueued(t, e.g, tc.pick, i+1)
			}
			unblock()
			tr := e.s.let(t)
			wg.Wait()
			if tr.op != tc.op || !slices.Equal(tr.keys, ks) {
				t.Errorf("second round trip %v, want %s of %q", tr, tc.op, ks)
			}
			// The blockers, the batch and the claims.
			want := dedupe.GroupCommitMaxInFlight + 1 + len(tks)
			if tc.op != "Claim" {
				want += dedupe.GroupCommitMaxInFlight // the blockers' claims
			}
			if got := len(e.s.log()); got != want {
				t.Errorf("%d round trips: %q", got, e.s.log())
			}
		})
	}
}

// TestGroupCommitInFlight checks that up to GroupCommitMaxInFlight round
// trips of a kind are in flight at once: calls are sent at once until that
// many are held, the next one queues, and it is sent as soon as one of them
// returns.
func TestGroupCommitInFlight(t *testing.T) {
	const k = dedupe.GroupCommitMaxInFlight
	e := newGCEnv()
	e.s.hold()
	ctx := t.Context()
	claim := func(key string) <-chan struct{} {
		return gcAsync(func() {
			res, err := testkit.Claim(ctx, e.g, gcClaim(key), time.Hour)
			if err != nil || res.Outcome != dedupe.Acquired {
				t.Errorf("Claim(%q) = %v, %v; want acquired", key, res.Outcome, err)
			}
		})
	}
	var (
		held []heldTrip
		done []<-chan struct{}
	)
	for i := range k {
		key := fmt.Sprint("k", i)
		done = append(done, claim(key))
		// Sent at once, as the call it is, though i are held.
		h := e.s.wait(t)
		if want := "Claim:[" + key + "]"; h.String() != want {
			t.Fatalf("round trip %d is %v, want %s", i, h.tripEntry, want)
		}
		held = append(held, h)
	}
	// With k held, the next call queues, and so does the one after it.
	last := claim("queued")
	gcQueued(t, e.g, gcClaims, 1)
	lastToo := claim("queued2")
	gcQueued(t, e.g, gcClaims, 2)
	select {
	case h := <-e.s.started:
		t.Fatalf("round trip %v started with %d in flight", h.tripEntry, k)
	case <-time.After(20 * time.Millisecond):
	}
	// One returns: what is queued goes at once, together, while the
	// others are still held.
	held[k-1].open()
	<-done[k-1]
	h := e.s.wait(t)
	if want := "Claim:[queued queued2]"; h.String() != want {
		t.Errorf("round trip after one returned is %v, want %s", h.tripEntry, want)
	}
	// k are in flight again: a new call queues until one returns.
	after := claim("after")
	gcQueued(t, e.g, gcClaims, 1)
	h.open()
	<-last
	<-lastToo
	if tr := e.s.let(t); tr.String() != "Claim:[after]" {
		t.Errorf("round trip after the batch returned is %v, want Claim:[after]", tr)
	}
	<-after
	for i := range k - 1 {
		held[i].open()
		<-done[i]
	}
	// Nothing left in flight or queued: a call is sent at once again. (The
	// sender goroutine counts its last round trip done just after "after"
	// has its answer.)
	for deadline := time.Now().Add(10 * time.Second); dedupe.GroupCommitClaimsInFlight(e.g) != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d claim round trips in flight 10s after the last returned", dedupe.GroupCommitClaimsInFlight(e.g))
		}
	}
	e.s.unhold()
	if got := statusOf(t, e.g, gcRef("fresh")); got != dedupe.Acquired {
		t.Errorf("fresh = %v, want acquired", got)
	}
	if got := e.s.log(); got[len(got)-2] != "Claim:[fresh]" {
		t.Errorf("last round trips %q, want a lone Claim of fresh", got[len(got)-2:])
	}
}

// TestGroupCommitOrder checks that the answers of one coalesced round trip
// are those of the calls made one after another in the order they queued.
func TestGroupCommitOrder(t *testing.T) {
	e := newGCEnv()
	done := holdKey(t, e.g, gcRef("done"), "", time.Hour)
	if err := testkit.Complete(t.Context(), e.g, done, time.Hour); err != nil {
		t.Fatal(err)
	}
	unblock := e.block(t, "Claim")
	ctx := t.Context()
	var (
		first  dedupe.ClaimResult
		batch  []dedupe.ClaimResult
		last   dedupe.ClaimResult
		errs   [3]error
		bErrs  []error
		waited sync.WaitGroup
	)
	waited.Go(func() { first, errs[0] = testkit.Claim(ctx, e.g, gcClaim("k"), time.Hour) })
	gcQueued(t, e.g, gcClaims, 1)
	waited.Go(func() {
		batch, bErrs, errs[1] = e.g.Claim(ctx, []dedupe.Item{gcClaim("k"), gcClaim("done"), gcClaim("j"), gcClaim("j")}, time.Hour)
	})
	gcQueued(t, e.g, gcClaims, 2)
	waited.Go(func() { last, errs[2] = testkit.Claim(ctx, e.g, gcClaim("j"), time.Hour) })
	gcQueued(t, e.g, gcClaims, 3)
	unblock()
	tr := e.s.let(t)
	waited.Wait()
	if want := "Claim:[k k done j j j]"; tr.String() != want {
		t.Errorf("round trip %v, want %s", tr, want)
	}
	if err := errors.Join(errs[:]...); err != nil {
		t.Fatal(err)
	}
	got := []dedupe.Outcome{first.Outcome}
	for i, r := range batch {
		if bErrs[i] != nil {
			t.Errorf("batch item %d: %v", i, bErrs[i])
		}
		got = append(got, r.Outcome)
	}
	got = append(got, last.Outcome)
	want := []dedupe.Outcome{dedupe.Acquired, dedupe.Busy, dedupe.Suppressed, dedupe.Acquired, dedupe.Busy, dedupe.Busy}
	if !slices.Equal(got, want) {
		t.Errorf("answers %v, want %v", got, want)
	}
}

// TestGroupCommitErrors checks that an item's error reaches its own caller
// only, in a round trip shared with calls that succeed, and that a round
// trip that fails as a whole, before or after reaching the store, fails
// every call in it.
func TestGroupCommitErrors(t *testing.T) {
	type call func(ctx context.Context, g dedupe.Store, tk dedupe.Ticket) error
	claim := func(k string) call {
		return func(ctx context.Context, g dedupe.Store, _ dedupe.Ticket) error {
			_, err := testkit.Claim(ctx, g, gcClaim(k), time.Hour)
			return err
		}
	}
	complete := func(ctx context.Context, g dedupe.Store, tk dedupe.Ticket) error {
		return testkit.Complete(ctx, g, tk, time.Hour)
	}
	release := func(ctx context.Context, g dedupe.Store, tk dedupe.Ticket) error {
		return testkit.Release(ctx, g, tk)
	}
	stale := func(c call) call {
		return func(ctx context.Context, g dedupe.Store, tk dedupe.Ticket) error {
			tk.Token = "stale"
			return c(ctx, g, tk)
		}
	}
	tests := []struct {
		name  string
		op    string
		pick  func(int, int, int) int
		calls []call
		fault *testkit.Fault
		// want is each call's error; nil: none.
		want []error
		// k0 is what a claim of k0 answers afterwards; zero skips it.
		k0 dedupe.Outcome
	}{
		{name: "ClaimInvalidKey", op: "Claim", pick: gcClaims, calls: []call{claim("good"), claim("bad\x00key"), claim("good2")},
			want: []error{nil, msgkey.ErrInvalid, nil}},
		{name: "CompleteLeaseLost", op: "Complete", pick: gcCompletions, calls: []call{complete, stale(complete), complete},
			want: []error{nil, dedupe.ErrLeaseLost, nil}},
		{name: "ReleaseLeaseLost", op: "Release", pick: gcReleases, calls: []call{release, stale(release), release},
			want: []error{nil, dedupe.ErrLeaseLost, nil}},
		// Each call can be made again; what the failed round trip took
		// (After) is simply in flight.
		{name: "RoundTripFails", op: "Claim", pick: gcClaims, calls: []call{claim("k0"), claim("k1"), claim("k2")},
			fault: &testkit.Fault{Ops: testkit.OpClaim, Nth: 1},
			want:  []error{testkit.ErrInjected, testkit.ErrInjected, testkit.ErrInjected}, k0: dedupe.Acquired},
		{name: "RoundTripFailsAfter", op: "Claim", pick: gcClaims, calls: []call{claim("k0"), claim("k1"), claim("k2")},
			fault: &testkit.Fault{Ops: testkit.OpClaim, Nth: 1, After: true},
			want:  []error{testkit.ErrInjected, testkit.ErrInjected, testkit.ErrInjected}, k0: dedupe.Busy},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTripStore()
			fs := testkit.NewFaultStore(s)
			e := gcEnv{s, dedupe.WithGroupCommit(fs)}
			tks := []dedupe.Ticket{holdKey(t, e.g, gcRef("x"), "", time.Hour), holdKey(t, e.g, gcRef("y"), "", time.Hour), holdKey(t, e.g, gcRef("z"), "", time.Hour)}
			unblock := e.block(t, tc.op)
			if tc.fault != nil {
				fs.Inject(*tc.fault)
			}
			ctx := t.Context()
			errs := make([]error, len(tc.calls))
			var wg sync.WaitGroup
			for i, c := range tc.calls {
				wg.Go(func() { errs[i] = c(ctx, e.g, tks[i]) })
				gcQueued(t, e.g, tc.pick, i+1)
			}
			unblock()
			if tc.fault == nil || tc.fault.After {
				if tr := e.s.let(t); len(tr.keys) != len(tc.calls) {
					t.Errorf("round trip %v, want all %d calls", tr, len(tc.calls))
				}
			}
			wg.Wait()
			for i, err := range errs {
				if !errors.Is(err, tc.want[i]) || (tc.want[i] == nil && err != nil) {
					t.Errorf("call %d = %v, want %v", i, err, tc.want[i])
				}
			}
			s.unhold()
			if tc.k0 != 0 {
				if got := statusOf(t, e.g, gcRef("k0")); got != tc.k0 {
					t.Errorf("k0 after the failed round trip = %v, want %v", got, tc.k0)
				}
			}
		})
	}
}

// TestGroupCommitContext checks what a caller's context does to its call
// and to the round trip it shares.
func TestGroupCommitContext(t *testing.T) {
	// A queued call whose context ends returns at once and is never sent.
	tests := []struct {
		name string
		end  func(ctx context.Context) (context.Context, func())
		want error
	}{
		{"Cancelled", func(ctx context.Context) (context.Context, func()) {
			return context.WithCancel(ctx)
		}, context.Canceled},
		{"DeadlineExceeded", func(ctx context.Context) (context.Context, func()) {
			ctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			return ctx, func() { <-ctx.Done(); cancel() }
		}, context.DeadlineExceeded},
	}
	for _, tc := range tests {
		t.Run("Queued"+tc.name, func(t *testing.T) {
			e := newGCEnv()
			unblock := e.block(t, "Claim")
			ctx, end := tc.end(t.Context())
			var err error
			returned := gcAsync(func() { _, err = testkit.Claim(ctx, e.g, gcClaim("k"), time.Hour) })
			gcQueuedOr(t, e.g, returned)
			end()
			<-returned // while the round trip before it is still held
			if !errors.Is(err, tc.want) {
				t.Errorf("Claim = %v, want %v", err, tc.want)
			}
			unblock()
			e.s.unhold()
			if got := statusOf(t, e.g, gcRef("k")); got != dedupe.Acquired {
				t.Errorf("k after a claim whose context ended = %v, want acquired (free)", got)
			}
			var want []string
			for _, k := range blockers("Claim") {
				want = append(want, "Claim:["+k+"]")
			}
			want = append(want, "Claim:[k]", "Release:[k]")
			if got := e.s.log(); !slices.Equal(got, want) {
				t.Errorf("round trips %q, want %q", got, want)
			}
		})
	}

	// A sent call whose context ends returns at once; the round trip goes
	// on for the others, and ends once none is left.
	t.Run("Sent", func(t *testing.T) {
		e := newGCEnv()
		unblock := e.block(t, "Claim")
		ctxA, cancelA := context.WithCancel(t.Context())
		ctxB, cancelB := context.WithCancel(t.Context())
		defer cancelB()
		var (
			errA, errB error
			resB       dedupe.ClaimResult
		)
		doneA := gcAsync(func() { _, errA = testkit.Claim(ctxA, e.g, gcClaim("a"), time.Hour) })
		gcQueued(t, e.g, gcClaims, 1)
		doneB := gcAsync(func() { resB, errB = testkit.Claim(ctxB, e.g, gcClaim("b"), time.Hour) })
		gcQueued(t, e.g, gcClaims, 2)
		unblock()
		h := e.s.wait(t) // sent, and held
		cancelA()
		<-doneA
		if !errors.Is(errA, context.Canceled) {
			t.Errorf("sent claim whose context ended = %v, want context.Canceled", errA)
		}
		h.open()
		<-doneB
		if errB != nil || resB.Outcome != dedupe.Acquired {
			t.Errorf("the other claim = %v, %v; want acquired", resB.Outcome, errB)
		}
		if h.String() != "Claim:[a b]" {
			t.Errorf("round trip %v, want both claims", h.tripEntry)
		}
		if errs := e.s.ended(); len(errs) != 0 {
			t.Errorf("round trip ended by a context: %v", errs)
		}
	})

	t.Run("AllGone", func(t *testing.T) {
		e := newGCEnv()
		unblock := e.block(t, "Claim")
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		errs := make([]error, 3)
		for i := range errs {
			wg.Go(func() { _, errs[i] = testkit.Claim(ctx, e.g, gcClaim(fmt.Sprint("k", i)), time.Hour) })
			gcQueued(t, e.g, gcClaims, i+1)
		}
		unblock()
		e.s.wait(t) // sent, and held
		cancel()
		wg.Wait()
		for i, err := range errs {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("call %d = %v, want context.Canceled", i, err)
			}
		}
		// The round trip was cancelled: it needs no let.
		testkit.WaitFor(t, "the round trip cancelled after all its callers had gone", func() bool { return len(e.s.ended()) > 0 })
		if got := e.s.ended(); !errors.Is(got[0], context.Canceled) {
			t.Errorf("round trip ended with %v, want context.Canceled", got[0])
		}
	})

	// The round trip carries its callers' latest deadline, if all have one.
	deadlines := []struct {
		name string
		in   []time.Duration // 0: no deadline
		want time.Duration
	}{
		{"Latest", []time.Duration{time.Hour, 3 * time.Hour, 2 * time.Hour}, 3 * time.Hour},
		{"OneWithout", []time.Duration{time.Hour, 0, 2 * time.Hour}, 0},
		{"Alone", []time.Duration{time.Hour}, time.Hour},
	}
	for _, tc := range deadlines {
		t.Run("Deadline"+tc.name, func(t *testing.T) {
			e := newGCEnv()
			unblock := e.block(t, "Claim")
			base := time.Now()
			var wg sync.WaitGroup
			for i, d := range tc.in {
				ctx := t.Context()
				if d != 0 {
					var cancel func()
					ctx, cancel = context.WithDeadline(ctx, base.Add(d))
					defer cancel()
				}
				wg.Go(func() {
					if _, err := testkit.Claim(ctx, e.g, gcClaim(fmt.Sprint("k", i)), time.Hour); err != nil {
						t.Error(err)
					}
				})
				gcQueued(t, e.g, gcClaims, i+1)
			}
			unblock()
			tr := e.s.let(t)
			wg.Wait()
			var want time.Time
			if tc.want != 0 {
				want = base.Add(tc.want)
			}
			if !tr.deadline.Equal(want) {
				t.Errorf("round trip deadline %v, want %v", tr.deadline, want)
			}
		})
	}
}

// TestGroupCommitRetention checks that completions share a round trip only
// with completions of equal retention, keeping their order otherwise.
func TestGroupCommitRetention(t *testing.T) {
	e := newGCEnv()
	rets := []time.Duration{time.Hour, 2 * time.Hour, time.Hour, 3 * time.Hour, 2 * time.Hour}
	var tks []dedupe.Ticket
	for i := range rets {
		tks = append(tks, holdKey(t, e.g, gcRef(fmt.Sprint("k", i)), "", time.Hour))
	}
	unblock := e.block(t, "Complete")
	ctx := t.Context()
	var wg sync.WaitGroup
	for i, r := range rets {
		wg.Go(func() {
			if err := testkit.Complete(ctx, e.g, tks[i], r); err != nil {
				t.Error(err)
			}
		})
		gcQueued(t, e.g, gcCompletions, i+1)
	}
	unblock()
	var got []string
	for range 3 {
		got = append(got, e.s.let(t).String())
	}
	wg.Wait()
	// Round trips sent at once may reach the store in either order.
	slices.Sort(got)
	want := []string{"Complete:[k0 k2]@1h0m0s", "Complete:[k1 k4]@2h0m0s", "Complete:[k3]@3h0m0s"}
	if !slices.Equal(got, want) {
		t.Errorf("round trips %q, want %q", got, want)
	}
}

// TestGroupCommitCap checks that a round trip holds at most 256 items and
// that a larger batch call goes straight to the store.
func TestGroupCommitCap(t *testing.T) {
	e := newGCEnv()
	unblock := e.block(t, "Claim")
	ctx := t.Context()
	var wg sync.WaitGroup
	const n = 300
	for i := range n {
		wg.Go(func() {
			if _, err := testkit.Claim(ctx, e.g, gcClaim(fmt.Sprint("k", i)), time.Hour); err != nil {
				t.Error(err)
			}
		})
	}
	gcQueued(t, e.g, gcClaims, n)
	// A batch of more than a round trip holds is not queued.
	big := make([]dedupe.Item, 257)
	for i := range big {
		big[i] = gcClaim(fmt.Sprint("big", i))
	}
	bigDone := gcAsync(func() {
		if _, _, err := e.g.Claim(ctx, big, time.Hour); err != nil {
			t.Error(err)
		}
	})
	if tr := e.s.let(t); tr.op != "Claim" || len(tr.keys) != len(big) {
		t.Errorf("big batch sent as %s of %d", tr.op, len(tr.keys))
	}
	<-bigDone // while the round trip before it is still held
	unblock()
	var sizes []int
	for range 2 {
		sizes = append(sizes, len(e.s.let(t).keys))
	}
	wg.Wait()
	// Round trips sent at once may reach the store in either order.
	slices.Sort(sizes)
	if want := []int{n - 256, 256}; !slices.Equal(sizes, want) {
		t.Errorf("round trips of %v items, want %v", sizes, want)
	}
}

// TestGroupCommitRefused checks that calls the store refuses as a whole go
// straight to it and fail alone.
func TestGroupCommitRefused(t *testing.T) {
	e := newGCEnv()
	tk := holdKey(t, e.g, gcRef("a"), "", time.Hour)
	unblock := e.block(t, "Claim")
	ctx := t.Context()
	before := len(e.s.log())
	if _, err := testkit.Claim(ctx, e.g, gcClaim("k"), 0); err == nil {
		t.Error("Claim with no lease succeeded")
	}
	if _, _, err := e.g.Claim(ctx, []dedupe.Item{gcClaim("j"), gcClaim("k")}, -time.Second); err == nil {
		t.Error("Claim with a negative lease succeeded")
	}
	if err := testkit.Complete(ctx, e.g, tk, 0); err == nil {
		t.Error("Complete with no retention succeeded")
	}
	if _, err := e.g.Complete(ctx, []dedupe.Ticket{tk}, -time.Second); err == nil {
		t.Error("Complete with a negative retention succeeded")
	}
	if got := e.s.log()[before:]; len(got) != 0 {
		t.Errorf("refused calls made round trips %q", got)
	}
	unblock()
	e.s.unhold()
	if got := statusOf(t, e.g, gcRef("j")); got != dedupe.Acquired {
		t.Errorf("j after a refused batch = %v, want acquired (free)", got)
	}
}

// TestGroupCommitConformance runs the conformance suite on the wrapper over
// a store whose round trips are held by nobody; its churn has many
// goroutines claim, complete and release a few keys through one wrapper.
func TestGroupCommitConformance(t *testing.T) {
	dedupetest.RunConformanceTests(t, func(t *testing.T) dedupe.Store {
		return dedupe.WithGroupCommit(newTripStore())
	}, dedupetest.Features{KeepsTrace: true})
}

// BenchmarkGroupCommit measures what the wrapper adds to a claim and a
// completion per message over an in-memory store, from 1 goroutine (every
// call sent at once) and from 20 (calls queue and are coalesced). The
// Redis and SQL stores' benchmarks measure it against real round trips.
func BenchmarkGroupCommit(b *testing.B) {
	for _, n := range []int{1, 20} {
		for _, wrap := range []bool{false, true} {
			name := fmt.Sprintf("goroutines=%d/store", n)
			if wrap {
				name = fmt.Sprintf("goroutines=%d/groupcommit", n)
			}
			b.Run(name, func(b *testing.B) {
				var s dedupe.Store = memdedupe.New(memdedupe.Config{})
				if wrap {
					s = dedupe.WithGroupCommit(s)
				}
				var next atomic.Int64
				ctx := b.Context()
				one := func() {
					ref := gcRef(strconv.FormatInt(next.Add(1), 10))
					if err := testkit.ClaimComplete(ctx, s, []dedupe.Item{{Ref: ref}}, make([]dedupe.Ticket, 1), time.Minute, time.Minute); err != nil {
						b.Fatal(err)
					}
				}
				testkit.Goroutines(b, n, one)
			})
		}
	}
}
