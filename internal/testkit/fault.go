package testkit

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"sync"
	"time"

	"github.com/idemq/idemq/dedupe"
)

// ErrInjected is wrapped by every error a [FaultStore] injects.
var ErrInjected = errors.New("testkit: injected fault")

// Op is a set of store calls.
type Op uint

// Store calls a [Fault] can count.
const (
	OpClaim Op = 1 << iota
	OpComplete
	OpRelease
	OpExtend

	// OpAll is every call.
	OpAll = OpClaim | OpComplete | OpRelease | OpExtend
)

var opNames = [...]string{"Claim", "Complete", "Release", "Extend"}

func (o Op) String() string {
	if o == 0 {
		return "none"
	}
	var names []string
	for i, name := range opNames {
		if o&(1<<i) != 0 {
			names = append(names, name)
		}
	}
	if rest := o &^ OpAll; rest != 0 {
		names = append(names, fmt.Sprintf("Op(%#x)", uint(rest)))
	}
	return strings.Join(names, "|")
}

// Fault says which calls of a [FaultStore] fail and how.
type Fault struct {
	// Ops are the calls the fault counts. Zero counts every call.
	Ops Op
	// Nth fails only the nth counted call after Inject (1 is the next one);
	// the calls after it pass again. Zero fails every counted call until
	// the next Inject or Heal.
	Nth int
	// After lets a failing call reach the wrapped store and replaces its
	// answer with the error: the write is applied but the caller never
	// learns it, as when a connection drops mid-call. Otherwise the failing
	// call never reaches the store.
	After bool
}

// FaultStore wraps a store and fails the calls its [Fault] selects, so that
// tests can prove how a caller behaves when the store fails mid-flow. A
// call of many items counts as one call. It is safe for concurrent use.
type FaultStore struct {
	store dedupe.Store

	mu    sync.Mutex
	fault *Fault
	seen  int    // calls counted by fault since Inject
	calls [4]int // calls made, by op bit
}

var _ dedupe.Store = (*FaultStore)(nil)

// NewFaultStore returns a FaultStore over s that fails nothing until Inject.
func NewFaultStore(s dedupe.Store) *FaultStore {
	return &FaultStore{store: s}
}

// Inject arms ft in place of any earlier fault and restarts its count.
func (f *FaultStore) Inject(ft Fault) {
	if ft.Ops == 0 {
		ft.Ops = OpAll
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fault, f.seen = &ft, 0
}

// Heal disarms the fault: every later call passes.
func (f *FaultStore) Heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fault = nil
}

// Calls reports how many calls of ops were made on f, failed ones included.
func (f *FaultStore) Calls(ops Op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for i, c := range f.calls {
		if ops&(1<<i) != 0 {
			n += c
		}
	}
	return n
}

// decide counts a call of op and says whether it fails, and when.
func (f *FaultStore) decide(op Op) (fail, after bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[bits.TrailingZeros(uint(op))]++
	ft := f.fault
	if ft == nil || ft.Ops&op == 0 {
		return false, false
	}
	f.seen++
	if ft.Nth == 0 || ft.Nth == f.seen {
		return true, ft.After
	}
	return false, false
}

// call runs do unless the fault says otherwise.
func (f *FaultStore) call(op Op, what string, do func() error) error {
	fail, after := f.decide(op)
	if !fail {
		return do()
	}
	where := "before reaching the store"
	if after {
		where = "after reaching the store"
		// The wrapped store's answer is lost, whatever it was.
		_ = do()
	}
	return fmt.Errorf("testkit: %v %s: %s: %w", op, what, where, ErrInjected)
}

// Claim implements [dedupe.Store].
func (f *FaultStore) Claim(ctx context.Context, reqs []dedupe.Item, lease time.Duration) ([]dedupe.ClaimResult, []error, error) {
	var (
		res  []dedupe.ClaimResult
		errs []error
	)
	err := f.call(OpClaim, fmt.Sprintf("of %d", len(reqs)), func() (err error) {
		res, errs, err = f.store.Claim(ctx, reqs, lease)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return res, errs, nil
}

// Complete implements [dedupe.Store].
func (f *FaultStore) Complete(ctx context.Context, ts []dedupe.Ticket, retention time.Duration) ([]error, error) {
	var errs []error
	err := f.call(OpComplete, fmt.Sprintf("of %d", len(ts)), func() (err error) {
		errs, err = f.store.Complete(ctx, ts, retention)
		return err
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}

// Release implements [dedupe.Store].
func (f *FaultStore) Release(ctx context.Context, ts []dedupe.Ticket) ([]error, error) {
	var errs []error
	err := f.call(OpRelease, fmt.Sprintf("of %d", len(ts)), func() (err error) {
		errs, err = f.store.Release(ctx, ts)
		return err
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}

// Extend implements [dedupe.Store].
func (f *FaultStore) Extend(ctx context.Context, t dedupe.Ticket, lease time.Duration) error {
	return f.call(OpExtend, fmt.Sprintf("%q", t.Ref), func() error {
		return f.store.Extend(ctx, t, lease)
	})
}

// Claim claims it alone on s for lease: a batch of one, as tests make most.
func Claim(ctx context.Context, s dedupe.Store, it dedupe.Item, lease time.Duration) (dedupe.ClaimResult, error) {
	res, errs, err := s.Claim(ctx, []dedupe.Item{it}, lease)
	if err != nil {
		return dedupe.ClaimResult{}, err
	}
	return res[0], errs[0]
}

// Complete completes t alone on s.
func Complete(ctx context.Context, s dedupe.Store, t dedupe.Ticket, retention time.Duration) error {
	errs, err := s.Complete(ctx, []dedupe.Ticket{t}, retention)
	if err != nil {
		return err
	}
	return errs[0]
}

// Release releases t alone on s.
func Release(ctx context.Context, s dedupe.Store, t dedupe.Ticket) error {
	errs, err := s.Release(ctx, []dedupe.Ticket{t})
	if err != nil {
		return err
	}
	return errs[0]
}
