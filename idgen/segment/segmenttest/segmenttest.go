// Package segmenttest checks segment stores against the [segment.Store]
// contract. [Run] is the conformance suite every backend runs from its own
// tests:
//
//	func TestSegmentConformance(t *testing.T) {
//		segmenttest.Run(t, func(t *testing.T) segment.Store {
//			return newSegments(t)
//		}, 0)
//	}
//
// Every test uses tags of its own, named at random, so the stores newStore
// returns may share one database and its old tags.
//
// # What it checks
//
//   - concurrency: goroutines on several stores reserve segments of one
//     tag, with the stored step and with steps of their own, and the
//     segments are disjoint and cover the counter from the tag's start to
//     its MaxID with no gap;
//   - steps: step 0 reserves the stored step, a given step is honoured, a
//     negative one fails with [idgen.ErrInvalidConfig] and changes nothing;
//   - the maximum: a short last segment up to it, then
//     [segment.ErrMaxReached] with nothing changed, also at the largest value
//     the store holds when no maximum is set;
//   - unknown tags: [segment.ErrUnknownTag] from NextSegment, Tag and SetMax;
//   - CreateTag: its start value, fields and validation; a tag that exists
//     fails with [segment.ErrTagExists] and keeps its record;
//   - SetMax: a maximum below MaxID is refused with
//     [idgen.ErrInvalidConfig], a raise lets segments continue, 0 removes
//     the maximum;
//   - cancelled contexts: every call fails and changes nothing;
//   - Tag and Tags: the records, sorted by name.
//
// [Unreachable] checks a store whose server does not answer.
package segmenttest

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/segment"
)

// Run runs the conformance suite as subtests of t. newStore returns a
// store over the database under test; calls made in one test share the
// database, as processes on several hosts would. Whatever it opens it
// closes through t.Cleanup. maxValue is the largest MaxID and Max the
// store holds, where a tag with no maximum ends; 0 means math.MaxInt64.
func Run(t *testing.T, newStore func(t *testing.T) segment.Store, maxValue int64) {
	if maxValue <= 0 {
		maxValue = math.MaxInt64
	}
	tests := []struct {
		name string
		fn   func(*suite)
	}{
		{"Concurrent", testConcurrent},
		{"StoredStep", testStoredStep},
		{"GivenStep", testGivenStep},
		{"NegativeStep", testNegativeStep},
		{"Max", testMax},
		{"MaxExact", testMaxExact},
		{"MaxValue", testMaxValue},
		{"UnknownTag", testUnknownTag},
		{"CreateTag", testCreateTag},
		{"CreateInvalid", testCreateInvalid},
		{"CreateExisting", testCreateExisting},
		{"SetMax", testSetMax},
		{"CancelledContext", testCancelledContext},
		{"Tags", testTags},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(&suite{T: t, src: newStore(t), newStore: newStore, maxValue: maxValue, name: tc.name})
		})
	}
}

// Unreachable checks src, a store whose server at addr does not answer:
// every call fails with an error that names the call and addr, and no
// sentinel of a known outcome.
func Unreachable(t *testing.T, src segment.Store, addr string) {
	ctx := t.Context()
	for _, c := range []struct {
		call string
		run  func() error
		what string
	}{
		{"NextSegment", func() error { _, err := src.NextSegment(ctx, "orders", 0); return err }, `next segment of tag "orders"`},
		{"NextSegment(step 100)", func() error { _, err := src.NextSegment(ctx, "orders", 100); return err }, `next segment of tag "orders"`},
		{"Tag", func() error { _, err := src.Tag(ctx, "orders"); return err }, `read tag "orders"`},
		{"Tags", func() error { _, err := src.Tags(ctx); return err }, `list tags`},
		{"CreateTag", func() error { return src.CreateTag(ctx, segment.Tag{Tag: "o2", Step: 1}) }, `create tag "o2"`},
		{"SetMax", func() error { return src.SetMax(ctx, "orders", 10) }, `set the maximum of tag "orders"`},
	} {
		err := c.run()
		if err == nil {
			t.Fatalf("%s with the server down succeeded", c.call)
		}
		for _, known := range []error{segment.ErrUnknownTag, segment.ErrMaxReached, idgen.ErrInvalidConfig, segment.ErrTagExists} {
			if errors.Is(err, known) {
				t.Fatalf("%s = %v: a known outcome, though the server is down", c.call, err)
			}
		}
		if msg := err.Error(); !strings.Contains(msg, addr) || !strings.Contains(msg, c.what) {
			t.Fatalf("%s = %q: want the call (%s) and the address (%s) named", c.call, msg, c.what, addr)
		}
	}
}

// suite is one subtest's helpers.
type suite struct {
	*testing.T
	src      segment.Store
	newStore func(*testing.T) segment.Store
	maxValue int64
	name     string
}

// tagName returns a tag name of the test, unique to the run.
func (s *suite) tagName() string {
	return fmt.Sprintf("st-%.20s-%s", strings.ToLower(s.name), strings.ToLower(rand.Text()[:12]))
}

// create records a new tag with its first segment at start, and returns
// its name.
func (s *suite) create(start, step, max int64) string {
	s.Helper()
	name := s.tagName()
	if err := s.src.CreateTag(s.Context(), segment.Tag{Tag: name, MaxID: start, Step: step, Max: max, Description: "segmenttest " + s.name}); err != nil {
		s.Fatalf("CreateTag(%q) = %v", name, err)
	}
	return name
}

// next reserves a segment and checks it is [start, end).
func (s *suite) next(tag string, step, start, end int64) segment.Segment {
	s.Helper()
	seg, err := s.src.NextSegment(s.Context(), tag, step)
	if err != nil {
		s.Fatalf("NextSegment(%q, %d) = %v; want [%d, %d)", tag, step, err, start, end)
	}
	if seg.Start != start || seg.End != end {
		s.Fatalf("NextSegment(%q, %d) = [%d, %d), want [%d, %d)", tag, step, seg.Start, seg.End, start, end)
	}
	return seg
}

// tag reads a tag's record.
func (s *suite) tag(name string) segment.Tag {
	s.Helper()
	got, err := s.src.Tag(s.Context(), name)
	if err != nil {
		s.Fatalf("Tag(%q) = %v", name, err)
	}
	if got.Tag != name {
		s.Fatalf("Tag(%q) returned the record of %q", name, got.Tag)
	}
	return got
}

// wantMaxID checks a tag's MaxID.
func (s *suite) wantMaxID(name string, want int64) {
	s.Helper()
	if got := s.tag(name).MaxID; got != want {
		s.Fatalf("tag %q has MaxID %d, want %d", name, got, want)
	}
}

// wantErr checks that err wraps want.
func (s *suite) wantErr(call string, err, want error) {
	s.Helper()
	if !errors.Is(err, want) {
		s.Fatalf("%s = %v, want %v", call, err, want)
	}
}

// Goroutines on several sources reserve segments of one tag, some with the
// stored step and some with steps of their own: the segments are disjoint
// and cover the counter from the start to the tag's MaxID.
func testConcurrent(s *suite) {
	const (
		sources    = 3
		goroutines = 4
		segments   = 25
		start      = 1000
	)
	tag := s.create(start, 5, 0)
	srcs := []segment.Store{s.src}
	for len(srcs) < sources {
		srcs = append(srcs, s.newStore(s.T))
	}
	var (
		mu   sync.Mutex
		segs []segment.Segment
		wg   sync.WaitGroup
	)
	errs := make(chan error, sources*goroutines)
	for i := range sources * goroutines {
		wg.Go(func() {
			src := srcs[i%sources]
			for j := range segments {
				step := int64((i + j) % 4) // 0 is the stored step
				seg, err := src.NextSegment(s.Context(), tag, step)
				if err != nil {
					errs <- fmt.Errorf("NextSegment(%q, %d) = %w", tag, step, err)
					return
				}
				want := step
				if step == 0 {
					want = 5
				}
				if seg.End-seg.Start != want || seg.Step != 5 {
					errs <- fmt.Errorf("NextSegment(%q, %d) = %+v, want %d IDs and the stored step 5", tag, step, seg, want)
					return
				}
				mu.Lock()
				segs = append(segs, seg)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		s.Fatal(err)
	}
	slices.SortFunc(segs, func(a, b segment.Segment) int { return cmp.Compare(a.Start, b.Start) })
	at := int64(start)
	for _, seg := range segs {
		if seg.Start != at {
			s.Fatalf("segment [%d, %d) follows one that ended at %d: overlap or gap", seg.Start, seg.End, at)
		}
		at = seg.End
	}
	s.wantMaxID(tag, at)
	if n := sources * goroutines * segments; len(segs) != n {
		s.Fatalf("%d segments, want %d", len(segs), n)
	}
}

// Step 0 reserves the stored step.
func testStoredStep(s *suite) {
	tag := s.create(0, 100, 0)
	seg := s.next(tag, 0, 0, 100)
	if seg.Step != 100 || seg.Max != 0 {
		s.Fatalf("segment %+v: want Step 100 and Max 0", seg)
	}
	s.next(tag, 0, 100, 200)
	s.wantMaxID(tag, 200)
}

// A given step is honoured, above and below the stored one, and the
// segment reports the stored step.
func testGivenStep(s *suite) {
	tag := s.create(7, 100, 0)
	for _, c := range []struct{ step, start, end int64 }{{1, 7, 8}, {3, 8, 11}, {250, 11, 261}} {
		if seg := s.next(tag, c.step, c.start, c.end); seg.Step != 100 {
			s.Fatalf("segment %+v: want the stored step 100", seg)
		}
	}
	s.wantMaxID(tag, 261)
}

// A negative step fails with ErrInvalidConfig and changes nothing.
func testNegativeStep(s *suite) {
	tag := s.create(50, 10, 0)
	_, err := s.src.NextSegment(s.Context(), tag, -1)
	s.wantErr("NextSegment(step -1)", err, idgen.ErrInvalidConfig)
	s.wantMaxID(tag, 50)
}

// Below a maximum the last segment holds what remains, then NextSegment
// fails with ErrMaxReached and changes nothing.
func testMax(s *suite) {
	tag := s.create(0, 10, 25)
	s.next(tag, 0, 0, 10)
	s.next(tag, 0, 10, 20)
	if seg := s.next(tag, 0, 20, 25); seg.Max != 25 || seg.Step != 10 {
		s.Fatalf("short segment %+v: want Max 25 and Step 10", seg)
	}
	for _, step := range []int64{0, 1, 100} {
		_, err := s.src.NextSegment(s.Context(), tag, step)
		s.wantErr(fmt.Sprintf("NextSegment(step %d) at the maximum", step), err, segment.ErrMaxReached)
	}
	s.wantMaxID(tag, 25)

	// A given step larger than what remains gets what remains.
	tag = s.create(0, 10, 25)
	s.next(tag, 24, 0, 24)
	s.next(tag, 24, 24, 25)
	_, err := s.src.NextSegment(s.Context(), tag, 24)
	s.wantErr("NextSegment at the maximum", err, segment.ErrMaxReached)
}

// Segments that end on the maximum leave no short one.
func testMaxExact(s *suite) {
	tag := s.create(0, 10, 20)
	s.next(tag, 0, 0, 10)
	s.next(tag, 0, 10, 20)
	_, err := s.src.NextSegment(s.Context(), tag, 0)
	s.wantErr("NextSegment at the maximum", err, segment.ErrMaxReached)
	s.wantMaxID(tag, 20)
	// A tag created at its maximum has no ID to give.
	tag = s.create(5, 10, 5)
	_, err = s.src.NextSegment(s.Context(), tag, 0)
	s.wantErr("NextSegment of a tag created at its maximum", err, segment.ErrMaxReached)
}

// A tag without a maximum ends at the largest value the source holds, with
// a short segment and no overflow.
func testMaxValue(s *suite) {
	top := s.maxValue
	tag := s.create(top-5, 10, 0)
	s.next(tag, 0, top-5, top)
	_, err := s.src.NextSegment(s.Context(), tag, math.MaxInt64)
	s.wantErr("NextSegment at the largest value", err, segment.ErrMaxReached)
	s.wantMaxID(tag, top)

	tag = s.create(0, 10, 0)
	if seg := s.next(tag, math.MaxInt64, 0, top); seg.Max != 0 {
		s.Fatalf("segment %+v of a tag without a maximum: want Max 0", seg)
	}

	_, err = s.src.NextSegment(s.Context(), tag, 0)
	s.wantErr("NextSegment at the largest value", err, segment.ErrMaxReached)
	if top < math.MaxInt64 {
		err = s.src.CreateTag(s.Context(), segment.Tag{Tag: s.tagName(), Step: 1, Max: top + 1})
		s.wantErr("CreateTag with Max above the largest value", err, idgen.ErrInvalidConfig)
		err = s.src.CreateTag(s.Context(), segment.Tag{Tag: s.tagName(), MaxID: top + 1, Step: 1})
		s.wantErr("CreateTag with MaxID above the largest value", err, idgen.ErrInvalidConfig)
	}
}

// A tag the source does not hold: NextSegment, Tag and SetMax fail with
// ErrUnknownTag.
func testUnknownTag(s *suite) {
	name := s.tagName()
	_, err := s.src.NextSegment(s.Context(), name, 0)
	s.wantErr("NextSegment of an unknown tag", err, segment.ErrUnknownTag)
	_, err = s.src.NextSegment(s.Context(), name, 10)
	s.wantErr("NextSegment(step 10) of an unknown tag", err, segment.ErrUnknownTag)
	_, err = s.src.Tag(s.Context(), name)
	s.wantErr("Tag of an unknown tag", err, segment.ErrUnknownTag)
	s.wantErr("SetMax of an unknown tag", s.src.SetMax(s.Context(), name, 10), segment.ErrUnknownTag)
	s.wantErr("SetMax(0) of an unknown tag", s.src.SetMax(s.Context(), name, 0), segment.ErrUnknownTag)
	_, err = s.src.Tag(s.Context(), name)
	s.wantErr("Tag after SetMax of an unknown tag", err, segment.ErrUnknownTag)
}

// CreateTag records the tag as given; its first segment starts at MaxID.
func testCreateTag(s *suite) {
	name := s.tagName()
	want := segment.Tag{Tag: name, MaxID: 1 << 40, Step: 1000, Max: 1 << 41, Description: "订单 orders, Leaf's biz_tag"}
	if err := s.src.CreateTag(s.Context(), want); err != nil {
		s.Fatalf("CreateTag = %v", err)
	}
	got := s.tag(name)
	if got.Updated.IsZero() {
		s.Fatalf("tag %+v has no update time", got)
	}
	created := got.Updated
	if want.Updated = got.Updated; !sameTag(got, want) {
		s.Fatalf("Tag = %+v, want %+v", got, want)
	}
	s.next(name, 0, 1<<40, 1<<40+1000)
	if after := s.tag(name).Updated; after.Before(created) {
		s.Fatalf("update time went back from %v to %v", created, after)
	}
}

// CreateTag refuses what cannot work, with ErrInvalidConfig, and records
// nothing.
func testCreateInvalid(s *suite) {
	for _, c := range []struct {
		name string
		tag  segment.Tag
	}{
		{"no name", segment.Tag{Step: 1}},
		{"step 0", segment.Tag{Tag: s.tagName()}},
		{"negative step", segment.Tag{Tag: s.tagName(), Step: -1}},
		{"negative MaxID", segment.Tag{Tag: s.tagName(), MaxID: -1, Step: 1}},
		{"negative Max", segment.Tag{Tag: s.tagName(), Step: 1, Max: -1}},
		{"Max below MaxID", segment.Tag{Tag: s.tagName(), MaxID: 10, Step: 1, Max: 9}},
		{"long name", segment.Tag{Tag: strings.Repeat("x", 1000), Step: 1}},
		{"invalid UTF-8", segment.Tag{Tag: "bad\xff", Step: 1}},
	} {
		err := s.src.CreateTag(s.Context(), c.tag)
		s.wantErr("CreateTag with "+c.name, err, idgen.ErrInvalidConfig)
		if c.tag.Tag != "" {
			_, err := s.src.Tag(s.Context(), c.tag.Tag)
			s.wantErr("Tag after CreateTag with "+c.name, err, segment.ErrUnknownTag)
		}
	}
}

// CreateTag of a tag that exists fails and keeps its record.
func testCreateExisting(s *suite) {
	tag := s.create(0, 10, 0)
	s.next(tag, 0, 0, 10)
	err := s.src.CreateTag(s.Context(), segment.Tag{Tag: tag, MaxID: 0, Step: 99})
	s.wantErr("CreateTag of an existing tag", err, segment.ErrTagExists)
	got := s.tag(tag)
	if got.MaxID != 10 || got.Step != 10 {
		s.Fatalf("tag %+v after a second CreateTag: want MaxID 10 and Step 10 kept", got)
	}
}

// SetMax refuses a maximum below MaxID, raises one, and removes it with 0.
func testSetMax(s *suite) {
	tag := s.create(0, 10, 15)
	s.next(tag, 0, 0, 10)
	s.next(tag, 0, 10, 15)
	_, err := s.src.NextSegment(s.Context(), tag, 0)
	s.wantErr("NextSegment at the maximum", err, segment.ErrMaxReached)

	s.wantErr("SetMax below MaxID", s.src.SetMax(s.Context(), tag, 14), idgen.ErrInvalidConfig)
	s.wantErr("SetMax negative", s.src.SetMax(s.Context(), tag, -1), idgen.ErrInvalidConfig)
	if got := s.tag(tag); got.Max != 15 || got.MaxID != 15 {
		s.Fatalf("tag %+v after refused SetMax: want Max 15 and MaxID 15", got)
	}
	// The maximum may equal MaxID: nothing more is issued.
	if err := s.src.SetMax(s.Context(), tag, 15); err != nil {
		s.Fatalf("SetMax to MaxID = %v", err)
	}
	if err := s.src.SetMax(s.Context(), tag, 32); err != nil {
		s.Fatalf("SetMax raise = %v", err)
	}
	s.next(tag, 0, 15, 25)
	if seg := s.next(tag, 0, 25, 32); seg.Max != 32 {
		s.Fatalf("segment %+v: want Max 32", seg)
	}
	_, err = s.src.NextSegment(s.Context(), tag, 0)
	s.wantErr("NextSegment at the raised maximum", err, segment.ErrMaxReached)

	if err := s.src.SetMax(s.Context(), tag, 0); err != nil {
		s.Fatalf("SetMax(0) = %v", err)
	}
	if got := s.tag(tag); got.Max != 0 {
		s.Fatalf("tag %+v after SetMax(0): want no maximum", got)
	}
	s.next(tag, 100, 32, 132)
	// Lowering to MaxID is allowed, and stops the tag.
	if err := s.src.SetMax(s.Context(), tag, 132); err != nil {
		s.Fatalf("SetMax to MaxID = %v", err)
	}
	_, err = s.src.NextSegment(s.Context(), tag, 0)
	s.wantErr("NextSegment at a maximum lowered to MaxID", err, segment.ErrMaxReached)
	s.wantMaxID(tag, 132)
}

// Every call on a cancelled context fails and changes nothing.
func testCancelledContext(s *suite) {
	tag := s.create(0, 10, 100)
	ctx, cancel := context.WithCancel(s.Context())
	cancel()
	if _, err := s.src.NextSegment(ctx, tag, 0); err == nil {
		s.Fatal("NextSegment on a cancelled context succeeded")
	}
	if _, err := s.src.NextSegment(ctx, tag, 5); err == nil {
		s.Fatal("NextSegment(step 5) on a cancelled context succeeded")
	}
	if err := s.src.SetMax(ctx, tag, 0); err == nil {
		s.Fatal("SetMax on a cancelled context succeeded")
	}
	name := s.tagName()
	if err := s.src.CreateTag(ctx, segment.Tag{Tag: name, Step: 1}); err == nil {
		s.Fatal("CreateTag on a cancelled context succeeded")
	}
	if _, err := s.src.Tag(ctx, tag); err == nil {
		s.Fatal("Tag on a cancelled context succeeded")
	}
	if _, err := s.src.Tags(ctx); err == nil {
		s.Fatal("Tags on a cancelled context succeeded")
	}
	got := s.tag(tag)
	if got.MaxID != 0 || got.Max != 100 {
		s.Fatalf("tag %+v after calls on a cancelled context: want MaxID 0 and Max 100", got)
	}
	_, err := s.src.Tag(s.Context(), name)
	s.wantErr("Tag after CreateTag on a cancelled context", err, segment.ErrUnknownTag)
}

// Tags lists every tag's record, sorted by name.
func testTags(s *suite) {
	made := map[string]segment.Tag{}
	for i := range 3 {
		name := s.create(int64(i*1000), int64(10+i), int64(i*5000))
		s.next(name, 0, int64(i*1000), int64(i*1000+10+i))
		made[name] = s.tag(name)
	}
	all, err := s.src.Tags(s.Context())
	if err != nil {
		s.Fatalf("Tags = %v", err)
	}
	if !slices.IsSortedFunc(all, func(a, b segment.Tag) int { return strings.Compare(a.Tag, b.Tag) }) {
		s.Fatal("Tags are not sorted by name")
	}
	for _, got := range all {
		want, ok := made[got.Tag]
		if !ok {
			continue // another test's, or an older run's
		}
		if !sameTag(got, want) {
			s.Fatalf("Tags lists %+v, Tag reads %+v", got, want)
		}
		delete(made, got.Tag)
	}
	if len(made) > 0 {
		s.Fatalf("Tags left out %v", made)
	}
}

// sameTag reports whether a and b are the same record.
func sameTag(a, b segment.Tag) bool {
	return a.Updated.Equal(b.Updated) && a.Tag == b.Tag && a.MaxID == b.MaxID && a.Step == b.Step &&
		a.Max == b.Max && a.Description == b.Description
}
