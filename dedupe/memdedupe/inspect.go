package memdedupe

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/dedupekit"
)

var _ dedupe.Inspector = (*Store)(nil)

// Get implements [dedupe.Inspector].
func (s *Store) Get(ctx context.Context, ref dedupe.Ref) (dedupe.Record, bool, error) {
	if err := check(ctx, checkRef(ref)); err != nil {
		return dedupe.Record{}, false, fmt.Errorf("memdedupe: get %q: %w", ref, err)
	}
	h := uint32(s.hash(ref))
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _, i, found := s.lookup(h, ref)
	if !found || !s.now().Before(s.rec(i).until) {
		return dedupe.Record{}, false, nil
	}
	return s.rec(i).inspect(), true, nil
}

// inspect returns what an operator sees of r: no token. The store keeps no
// time of the last write, so Updated is zero.
func (r *record) inspect() dedupe.Record {
	return dedupe.Record{Ref: r.ref, Done: r.done, Fingerprint: r.fp, Expires: r.until, Trace: r.trace}
}

// List implements [dedupe.Inspector]. It reads every record under the
// store's lock, O(records) per page: the store is for tests and a single
// process, where that is small.
func (s *Store) List(ctx context.Context, req dedupe.ListRequest) ([]dedupe.Record, string, error) {
	what := fmt.Sprintf("list %s/%s/%s*", req.Namespace, req.Group, req.Prefix)
	if err := check(ctx, dedupekit.CheckList(req.Namespace, req.Group, req.Prefix, req.Limit)); err != nil {
		return nil, "", fmt.Errorf("memdedupe: %s: %w", what, err)
	}
	after, err := dedupekit.ParseKeyCursor(req.Cursor)
	if err != nil {
		return nil, "", fmt.Errorf("memdedupe: %s: %w", what, err)
	}
	limit := req.Limit
	if limit == 0 {
		limit = dedupekit.DefaultListLimit
	}
	var page []dedupe.Record
	s.mu.Lock()
	now := s.now()
	for _, p := range s.pages {
		for i := range p {
			r := &p[i]
			if r.seq != 0 && r.ref.Namespace == req.Namespace && r.ref.Group == req.Group &&
				r.ref.Key > after && strings.HasPrefix(r.ref.Key, req.Prefix) && now.Before(r.until) {
				page = append(page, r.inspect())
			}
		}
	}
	s.mu.Unlock()
	slices.SortFunc(page, func(a, b dedupe.Record) int { return strings.Compare(a.Ref.Key, b.Ref.Key) })
	if len(page) <= limit {
		return page, "", nil
	}
	page = page[:limit]
	return page, dedupekit.KeyCursor(page[limit-1].Ref.Key), nil
}

// Stats implements [dedupe.Inspector].
func (s *Store) Stats(ctx context.Context, namespace, group string) (dedupe.Stats, error) {
	if err := check(ctx, dedupekit.CheckList(namespace, group, "", 0)); err != nil {
		return dedupe.Stats{}, fmt.Errorf("memdedupe: stats %s/%s: %w", namespace, group, err)
	}
	var st dedupe.Stats
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for _, p := range s.pages {
		for i := range p {
			r := &p[i]
			if r.seq == 0 || r.ref.Namespace != namespace || r.ref.Group != group || !now.Before(r.until) {
				continue
			}
			if r.done {
				st.Done++
			} else {
				st.Processing++
			}
		}
	}
	return st, nil
}

// Forget implements [dedupe.Inspector]. It deletes an expired record too,
// reporting false for it; its slot's claim number goes with it, so the
// token of a forgotten lease matches no later record.
func (s *Store) Forget(ctx context.Context, ref dedupe.Ref) (bool, error) {
	if err := check(ctx, checkRef(ref)); err != nil {
		return false, fmt.Errorf("memdedupe: forget %q: %w", ref, err)
	}
	h := uint32(s.hash(ref))
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _, i, found := s.lookup(h, ref)
	if !found {
		return false, nil
	}
	live := s.now().Before(s.rec(i).until)
	s.drop(i)
	return live, nil
}
