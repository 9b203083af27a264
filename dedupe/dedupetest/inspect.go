package dedupetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/dedupekit"
	"github.com/idemq/idemq/msgkey"
)

// testInspector checks a store's [dedupe.Inspector], if it has one.
func testInspector(s *suite) {
	if _, ok := s.store.(dedupe.Inspector); !ok {
		if s.f.Inspector {
			s.Fatalf("Features.Inspector is set but %T does not implement dedupe.Inspector", s.store)
		}
		s.Logf("%T does not implement dedupe.Inspector", s.store)
		return
	}
	for _, tc := range []struct {
		name string
		fn   func(*suite, dedupe.Inspector)
	}{
		{"Get", testInspectGet},
		{"List", testInspectList},
		{"ListPrefix", testInspectListPrefix},
		{"ListScopes", testInspectListScopes},
		{"Stats", testInspectStats},
		{"Forget", testInspectForget},
		{"InvalidKeys", testInspectInvalid},
		{"CancelledContext", testInspectCancelled},
	} {
		s.Run(tc.name, func(t *testing.T) {
			sub := s.sub(t)
			tc.fn(sub, sub.store.(dedupe.Inspector))
		})
	}
}

// clockSlack bounds how far the store's clock may be from the suite's when
// the suite checks a record's times: the store and the suite share a host in
// every test run, so this only absorbs slow calls.
const clockSlack = time.Minute

// near reports whether t is within clockSlack of want.
func near(t, want time.Time) bool {
	d := t.Sub(want)
	return -clockSlack < d && d < clockSlack
}

func (s *suite) get(in dedupe.Inspector, ref dedupe.Ref) (dedupe.Record, bool) {
	s.Helper()
	rec, ok, err := in.Get(s.Context(), ref)
	if err != nil {
		s.Fatalf("Get(%q): %v", ref, err)
	}
	if ok && rec.Ref != ref {
		s.Errorf("Get(%q) returned the record of %q", ref, rec.Ref)
	}
	if !ok && rec != (dedupe.Record{}) {
		s.Errorf("Get(%q) = %+v with ok false, want a zero record", ref, rec)
	}
	return rec, ok
}

// checkRecord checks rec against what the suite did to its key: done or
// not, with fingerprint fp, for a lease or retention of d that began about
// now.
func (s *suite) checkRecord(what string, rec dedupe.Record, done bool, fp string, d time.Duration) {
	s.Helper()
	now := time.Now()
	if rec.Done != done || rec.Fingerprint != fp {
		s.Errorf("%s = done %v, fingerprint %q; want done %v, fingerprint %q", what, rec.Done, rec.Fingerprint, done, fp)
	}
	if !near(rec.Expires, now.Add(d)) {
		s.Errorf("%s expires at %v, want about %v from now (%v)", what, rec.Expires, d, now.Add(d))
	}
	if !rec.Updated.IsZero() && !near(rec.Updated, now) {
		s.Errorf("%s updated at %v, want about now (%v) or zero", what, rec.Updated, now)
	}
}

func testInspectGet(s *suite, in dedupe.Inspector) {
	processing, done, short, released := s.ref("processing"), s.ref("done"), s.ref("short"), s.ref("released")
	s.claimFP(processing, long, "fp-processing")
	s.complete(s.acquire(done, long), 3*long, nil)
	s.release(s.acquire(released, long), nil)
	sent := time.Now()
	s.acquire(short, shortLease)
	if _, ok := s.get(in, short); !ok && !s.stalled(sent, shortLease, "Get of the short lease = none") {
		s.Errorf("Get(%q) of a live lease = none", short)
	}

	if rec, ok := s.get(in, processing); !ok {
		s.Errorf("Get(%q) of a claimed key = none", processing)
	} else {
		s.checkRecord("Get(processing)", rec, false, "fp-processing", long)
	}
	if rec, ok := s.get(in, done); !ok {
		s.Errorf("Get(%q) of a completed key = none", done)
	} else {
		s.checkRecord("Get(done)", rec, true, "", 3*long)
	}
	for _, r := range []dedupe.Ref{released, s.ref("never"), s.ref("Processing"), s.ref("processing ")} {
		if rec, ok := s.get(in, r); ok {
			s.Errorf("Get(%q) = %+v, want none", r, rec)
		}
	}
	s.expire()
	if rec, ok := s.get(in, short); ok {
		s.Errorf("Get(%q) after its lease ended = %+v, want none", short, rec)
	}
}

// listAll lists req's group to the end and returns the records in the
// order listed. It checks each page's size, and on stores whose pages are
// in key order, the order across pages.
func (s *suite) listAll(in dedupe.Inspector, req dedupe.ListRequest) []dedupe.Record {
	s.Helper()
	limit := req.Limit
	if limit == 0 {
		limit = dedupekit.DefaultListLimit
	}
	var all []dedupe.Record
	for pages := 0; ; pages++ {
		if pages > 10000 {
			s.Fatalf("List(%s) has not ended after %d pages", describe(req), pages)
		}
		page, next, err := in.List(s.Context(), req)
		if err != nil {
			s.Fatalf("List(%s): %v", describe(req), err)
		}
		max := limit
		if s.f.UnorderedList {
			max += 10 // a few more: the keys of SCAN's last bucket
		}
		if len(page) > max {
			s.Errorf("List(%s) = %d records, more than the limit", describe(req), len(page))
		}
		for _, rec := range page {
			if rec.Ref.Namespace != req.Namespace || rec.Ref.Group != req.Group || !strings.HasPrefix(rec.Ref.Key, req.Prefix) {
				s.Errorf("List(%s) returned %q", describe(req), rec.Ref)
			}
			if !s.f.UnorderedList && len(all) > 0 && all[len(all)-1].Ref.Key >= rec.Ref.Key {
				s.Errorf("List(%s) returned %q after %q, want byte order", describe(req), rec.Ref.Key, all[len(all)-1].Ref.Key)
			}
			all = append(all, rec)
		}
		if next == "" {
			return all
		}
		if !s.f.UnorderedList && len(page) < limit {
			s.Errorf("List(%s) = %d records and a next page, want a full page", describe(req), len(page))
		}
		req.Cursor = next
	}
}

// listKeys lists req's group to the end and checks that it holds exactly
// the keys want, each once (on stores whose pages come in SCAN order,
// at least once).
func (s *suite) listKeys(in dedupe.Inspector, req dedupe.ListRequest, want []string) []dedupe.Record {
	s.Helper()
	recs := s.listAll(in, req)
	var got []string
	for _, rec := range recs {
		got = append(got, rec.Ref.Key)
	}
	slices.Sort(got)
	if s.f.UnorderedList {
		got = slices.Compact(got)
	}
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		s.Errorf("List(%s) = keys %q, want %q", describe(req), got, want)
	}
	return recs
}

// describe prints a ListRequest for an error message.
func describe(req dedupe.ListRequest) string {
	return fmt.Sprintf("%q, %q, prefix %q, cursor %q, limit %d", req.Namespace, req.Group, req.Prefix, req.Cursor, req.Limit)
}

func testInspectList(s *suite, in dedupe.Inspector) {
	var keys []string
	for i := range 23 {
		k := fmt.Sprintf("item-%02d", i)
		keys = append(keys, k)
		switch i % 3 {
		case 0:
			s.claimFP(s.ref(k), long, "fp-"+k)
		case 1:
			s.complete(s.acquire(s.ref(k), long), 3*long, nil)
		case 2:
			s.acquire(s.ref(k), long)
		}
	}
	s.release(s.acquire(s.ref("released"), long), nil)

	got := s.listKeys(in, dedupe.ListRequest{Namespace: "dedupetest", Group: s.id, Limit: 4}, keys)
	for _, rec := range got {
		var i int
		fmt.Sscanf(rec.Ref.Key, "item-%d", &i)
		switch i % 3 {
		case 0:
			s.checkRecord(fmt.Sprintf("List record %q", rec.Ref.Key), rec, false, "fp-"+rec.Ref.Key, long)
		case 1:
			s.checkRecord(fmt.Sprintf("List record %q", rec.Ref.Key), rec, true, "", 3*long)
		case 2:
			s.checkRecord(fmt.Sprintf("List record %q", rec.Ref.Key), rec, false, "", long)
		}
	}
	s.acquire(s.ref("expired"), shortLease)
	s.expire()
	for _, limit := range []int{1, 5, 0} {
		s.listKeys(in, dedupe.ListRequest{Namespace: "dedupetest", Group: s.id, Limit: limit}, keys)
	}

	// A cursor is opaque, but not anything at all.
	for _, c := range []string{"%%%", "not a cursor", "-1"} {
		if page, _, err := in.List(s.Context(), dedupe.ListRequest{Namespace: "dedupetest", Group: s.id, Cursor: c}); err == nil || isSentinel(err) {
			s.Errorf("List with cursor %q = %d records, %v; want a plain error", c, len(page), err)
		}
	}
	if _, _, err := in.List(s.Context(), dedupe.ListRequest{Namespace: "dedupetest", Group: s.id, Limit: -1}); err == nil || isSentinel(err) {
		s.Errorf("List with limit -1 = %v, want a plain error", err)
	}
	s.listKeys(in, dedupe.ListRequest{Namespace: "dedupetest", Group: s.id + "-empty"}, nil)
}

// testInspectListPrefix lists by prefixes that are patterns in SQL LIKE or
// a Redis glob: each matches only keys that begin with it byte for byte.
func testInspectListPrefix(s *suite, in dedupe.Inspector) {
	keys := []string{
		"a*", "ab", "abc", "a", "a?", "a[b]", "ac", `a\`, `a\b`, "a%", "a%b", "a_", "aX", "a b", "a*b", "b", "*", "?x",
		"é", "éa", "e", "🙂", "🙂x", "\U0010FFFF", "\U0010FFFFx", "\uffff", "a\u007e", "a\u00a0",
		"a\U0010FFFF", "a\U0010FFFFb", "\ud7ff", "\ud7ffx", "\ue000",
	}
	for i := range 12 {
		keys = append(keys, fmt.Sprintf("p[%%_*?]-%02d", i), fmt.Sprintf("p[%%_*?]x%02d", i))
	}
	for _, k := range keys {
		s.acquire(s.ref(k), long)
	}
	for _, prefix := range []string{
		"", "a", "a*", "a?", "a[", "a[b]", `a\`, "a%", "a_", "ab", "a ", "*", "?", "[", "é", "e", "🙂", "\U0010FFFF", "\uffff", "a~", "a\U0010FFFF", "\ud7ff",
		"p[", "p[%_*?]", "p[%_*?]-", "p[%_*?]-1", "p[%_*?]x0", "none", "abcd",
	} {
		var want []string
		for _, k := range keys {
			if strings.HasPrefix(k, prefix) {
				want = append(want, k)
			}
		}
		s.listKeys(in, dedupe.ListRequest{Namespace: "dedupetest", Group: s.id, Prefix: prefix, Limit: 3}, want)
	}
	// The longest prefix there is: the longest key.
	longest := strings.Repeat("k", msgkey.MaxLen)
	s.acquire(s.ref(longest), long)
	s.listKeys(in, dedupe.ListRequest{Namespace: "dedupetest", Group: s.id, Prefix: longest}, []string{longest})
}

// testInspectListScopes checks that a listing holds its own namespace and
// group only, whatever syntax they hold.
func testInspectListScopes(s *suite, in dedupe.Inspector) {
	refs := map[[2]string][]string{}
	for _, ng := range [][2]string{
		{s.id, "g"}, {s.id, "g2"}, {s.id, "g*"}, {s.id, "gx"}, {s.id, "{g}"}, {s.id, "g:k"}, {s.id, "g%3Ak"}, {s.id, `g\`},
		{s.id + ":g", "k"}, {s.id, "g:k:x"}, {s.id + "*", "g"}, {s.id + "x", "g"}, {"", s.id + "g"}, {s.id + "?", "[g]"},
	} {
		for i := range 3 {
			k := fmt.Sprint("k", i)
			s.acquire(dedupe.Ref{Namespace: ng[0], Group: ng[1], Key: k}, long)
			refs[ng] = append(refs[ng], k)
		}
	}
	for ng, keys := range refs {
		s.listKeys(in, dedupe.ListRequest{Namespace: ng[0], Group: ng[1], Limit: 2}, keys)
		st, err := in.Stats(s.Context(), ng[0], ng[1])
		if err != nil || st != (dedupe.Stats{Processing: int64(len(keys))}) {
			s.Errorf("Stats(%q, %q) = %+v, %v; want %d processing", ng[0], ng[1], st, err, len(keys))
		}
	}
}

func testInspectStats(s *suite, in dedupe.Inspector) {
	// stats checks the group's counts. want counts a processing key and a
	// done one of shortLease, whose calls were sent at short unless it is
	// zero: if they may have ended, either count may lack them.
	stats := func(want dedupe.Stats, short time.Time) {
		s.Helper()
		st, err := in.Stats(s.Context(), "dedupetest", s.id)
		if err != nil || st == want {
			if err != nil {
				s.Errorf("Stats = %v; want %+v", err, want)
			}
			return
		}
		ended := dedupe.Stats{Processing: want.Processing - st.Processing, Done: want.Done - st.Done}
		if !short.IsZero() && ended.Processing >= 0 && ended.Processing <= 1 && ended.Done >= 0 && ended.Done <= 1 &&
			s.stalled(short, shortLease, fmt.Sprintf("Stats = %+v", st)) {
			return
		}
		s.Errorf("Stats = %+v; want %+v", st, want)
	}
	stats(dedupe.Stats{}, time.Time{})
	s.acquire(s.ref("forgotten"), long)
	if _, err := in.Forget(s.Context(), s.ref("forgotten")); err != nil {
		s.Fatalf("Forget: %v", err)
	}
	s.release(s.acquire(s.ref("released"), long), nil)
	for i := range 4 {
		s.acquire(s.ref(fmt.Sprint("p", i)), long)
	}
	for i := range 3 {
		s.complete(s.acquire(s.ref(fmt.Sprint("d", i)), long), long, nil)
	}
	sent := time.Now()
	s.acquire(s.ref("short"), shortLease)
	s.complete(s.acquire(s.ref("short-done"), long), shortLease, nil)
	stats(dedupe.Stats{Processing: 5, Done: 4}, sent)
	s.expire()
	stats(dedupe.Stats{Processing: 4, Done: 3}, time.Time{})
}

func testInspectForget(s *suite, in dedupe.Inspector) {
	forget := func(r dedupe.Ref, want bool) {
		s.Helper()
		if got, err := in.Forget(s.Context(), r); err != nil || got != want {
			s.Fatalf("Forget(%q) = %v, %v; want %v", r, got, err, want)
		}
		if rec, ok := s.get(in, r); ok {
			s.Errorf("Get(%q) after Forget = %+v, want none", r, rec)
		}
	}
	// A processing key: its holder loses the lease, and the key is free.
	r := s.ref("processing")
	holder := s.acquire(r, long)
	forget(r, true)
	s.complete(holder, long, dedupe.ErrLeaseLost)
	s.extend(holder, long, dedupe.ErrLeaseLost)
	s.release(holder, dedupe.ErrLeaseLost)
	tk := s.acquire(r, long)
	s.complete(holder, long, dedupe.ErrLeaseLost)
	s.complete(tk, long, nil)

	// A done key runs again.
	r = s.ref("done")
	s.complete(s.acquire(r, long), long, nil)
	s.want(r, "", dedupe.Suppressed)
	forget(r, true)
	forget(r, false)
	s.acquire(r, long)

	// Nothing to forget: never claimed, released, or expired.
	forget(s.ref("never"), false)
	r = s.ref("released")
	s.release(s.acquire(r, long), nil)
	forget(r, false)
	r = s.ref("expired")
	s.acquire(r, shortLease)
	s.expire()
	forget(r, false)
	s.acquire(r, long)

	// Only the key named goes, byte for byte.
	for _, k := range []string{"a*", "ab", "a", "A"} {
		s.acquire(s.ref(k), long)
	}
	forget(s.ref("a*"), true)
	for _, k := range []string{"ab", "a", "A"} {
		if _, ok := s.get(in, s.ref(k)); !ok {
			s.Errorf("Forget(%q) took %q too", "a*", k)
		}
	}
}

func testInspectInvalid(s *suite, in dedupe.Inspector) {
	ctx := s.Context()
	for _, r := range s.invalidRefs() {
		_, _, err := in.Get(ctx, r)
		_, ferr := in.Forget(ctx, r)
		for what, err := range map[string]error{"Get": err, "Forget": ferr} {
			if !errors.Is(err, msgkey.ErrInvalid) {
				s.Errorf("%s(%.60q) = %v, want msgkey.ErrInvalid", what, r, err)
			}
		}
		// The key becomes the prefix of a listing; "" is a good one.
		req := dedupe.ListRequest{Namespace: r.Namespace, Group: r.Group, Prefix: r.Key}
		if dedupekit.CheckList(req.Namespace, req.Group, req.Prefix, req.Limit) == nil {
			continue
		}
		if _, _, err := in.List(ctx, req); !errors.Is(err, msgkey.ErrInvalid) {
			s.Errorf("List(%.60q, %.60q, prefix %.60q) = %v, want msgkey.ErrInvalid", req.Namespace, req.Group, req.Prefix, err)
		}
		if dedupekit.CheckRef(r.Namespace, r.Group, "k") != nil {
			if _, err := in.Stats(ctx, r.Namespace, r.Group); !errors.Is(err, msgkey.ErrInvalid) {
				s.Errorf("Stats(%.60q, %.60q) = %v, want msgkey.ErrInvalid", r.Namespace, r.Group, err)
			}
		}
	}
}

// testInspectCancelled checks that every call whose context is done fails
// with the context's error, and that Forget then forgets nothing.
func testInspectCancelled(s *suite, in dedupe.Inspector) {
	r := s.ref("k")
	s.acquire(r, long)
	cancelled, cancel := context.WithCancel(s.Context())
	cancel()
	check := func(what string, err error) {
		s.Helper()
		if !errors.Is(err, context.Canceled) || isSentinel(err) {
			s.Errorf("%s = %v, want %v", what, err, context.Canceled)
		}
	}
	_, _, err := in.Get(cancelled, r)
	check("Get", err)
	_, _, err = in.List(cancelled, dedupe.ListRequest{Namespace: r.Namespace, Group: r.Group})
	check("List", err)
	_, err = in.Stats(cancelled, r.Namespace, r.Group)
	check("Stats", err)
	_, err = in.Forget(cancelled, r)
	check("Forget", err)
	if _, ok := s.get(in, r); !ok {
		s.Errorf("Get(%q) after a cancelled Forget = none, want the record", r)
	}
}
