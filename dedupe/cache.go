package dedupe

import (
	"container/list"
	"context"
	"sync"
	"time"

	"github.com/idemq/idemq/internal/dedupekit"
)

// withDoneCache returns a Store that remembers up to size keys that store
// answered or recorded as done, most recently used first, and answers their
// duplicates from memory without a round trip (the [GuardConfig.DoneCache]
// setting). Everything else goes to store, the keys it cannot answer in one
// call.
//
// The cache never answers Suppressed for a key that store does not hold as
// done: an entry lives no longer than the record's retention, measured on
// the local clock from before the store's answer (the store's deadline is
// never earlier), and is used for a claim with a fingerprint only once store
// has answered Suppressed to that fingerprint. This holds as long as nothing
// but a Store's own methods removes done records: after an operator deletes
// keys or Redis evicts them, the cache may still answer Suppressed for up
// to their retention. The Until of a cached answer is now plus the time
// left, both on the local clock.
func withDoneCache(store Store, size int) *doneCache {
	return &doneCache{store: store, size: size, lru: list.New(), byRef: make(map[Ref]*list.Element, size)}
}

type doneCache struct {
	store Store
	size  int

	mu    sync.Mutex
	lru   *list.List // of *doneEntry, most recently used at the front
	byRef map[Ref]*list.Element
}

type doneEntry struct {
	ref     Ref
	fp      string    // a fingerprint the store answered Suppressed to, if any
	expires time.Time // local clock, no later than the store's deadline
	trace   string    // the trace the store answered or the completion kept, if any
}

// lookup answers req from the cache if it can.
func (c *doneCache) lookup(req Item, now time.Time) (ClaimResult, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.byRef[req.Ref]
	if el == nil {
		return ClaimResult{}, false
	}
	e := el.Value.(*doneEntry)
	if !now.Before(e.expires) {
		c.lru.Remove(el)
		delete(c.byRef, req.Ref)
		return ClaimResult{}, false
	}
	if req.Fingerprint != "" && req.Fingerprint != e.fp {
		return ClaimResult{}, false // the store may answer Reused
	}
	c.lru.MoveToFront(el)
	left := e.expires.Sub(now)
	return ClaimResult{Outcome: Suppressed, Until: now.Add(left), Remaining: left, Trace: e.trace}, true
}

// remember records that the store holds ref as done until at least
// expires, answers Suppressed to fp, and names the run of trace.
func (c *doneCache) remember(ref Ref, fp string, expires time.Time, trace string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.byRef[ref]; el != nil {
		e := el.Value.(*doneEntry)
		e.expires = expires
		if fp != "" {
			e.fp = fp
		}
		e.trace = trace
		c.lru.MoveToFront(el)
		return
	}
	c.byRef[ref] = c.lru.PushFront(&doneEntry{ref: ref, fp: fp, expires: expires, trace: trace})
	if c.lru.Len() > c.size {
		oldest := c.lru.Back()
		c.lru.Remove(oldest)
		delete(c.byRef, oldest.Value.(*doneEntry).ref)
	}
}

// cacheable reports whether req may be answered from the cache: a bad
// request or a done context must get the store's error.
func cacheable(ctx context.Context, req Item, lease time.Duration) bool {
	return ctx.Err() == nil && dedupekit.CheckClaim(req.Namespace, req.Group, req.Key, lease, req.Fingerprint) == nil
}

func (c *doneCache) Claim(ctx context.Context, reqs []Item, lease time.Duration) ([]ClaimResult, []error, error) {
	now := time.Now()
	res := make([]ClaimResult, len(reqs))
	var (
		missed []int // indexes of the requests the store must answer
		ask    []Item
	)
	for i, req := range reqs {
		if cacheable(ctx, req, lease) {
			if r, ok := c.lookup(req, now); ok {
				res[i] = r
				continue
			}
		}
		missed = append(missed, i)
		ask = append(ask, req)
	}
	errs := make([]error, len(reqs))
	if len(ask) == 0 {
		return res, errs, nil
	}
	got, gotErrs, err := c.store.Claim(ctx, ask, lease)
	if err != nil {
		return nil, nil, err
	}
	for j, i := range missed {
		res[i], errs[i] = got[j], gotErrs[j]
		if errs[i] == nil && res[i].Outcome == Suppressed {
			c.remember(reqs[i].Ref, reqs[i].Fingerprint, now.Add(res[i].Remaining), res[i].Trace)
		}
	}
	return res, errs, nil
}

func (c *doneCache) Complete(ctx context.Context, ts []Ticket, retention time.Duration) ([]error, error) {
	now := time.Now()
	errs, err := c.store.Complete(ctx, ts, retention)
	if err != nil {
		return nil, err
	}
	for i, t := range ts {
		if errs[i] == nil {
			c.remember(t.Ref, "", now.Add(retention), dedupekit.KeptTrace(t.Trace))
		}
	}
	return errs, nil
}

func (c *doneCache) Release(ctx context.Context, ts []Ticket) ([]error, error) {
	return c.store.Release(ctx, ts)
}

func (c *doneCache) Extend(ctx context.Context, t Ticket, lease time.Duration) error {
	return c.store.Extend(ctx, t, lease)
}
