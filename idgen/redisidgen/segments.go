package redisidgen

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/internal/rediskey"
	"github.com/idemq/idemq/internal/segtag"
)

// maxSegmentValue is the largest MaxID and Max a tag holds in Redis: the
// scripts count in Lua numbers, exact up to 2^53. A tag without a maximum
// ends there.
const maxSegmentValue = 1 << 53

// NewSegments returns a [segment.Store] over Redis through client, which
// the caller owns: the store never closes it, and does no I/O until used.
// namespace opens every key's hash tag, so that the tags of several
// applications stand apart in a shared Redis; "" means "idemq". The store
// keeps a hash per tag with Leaf's columns as fields, which HGETALL shows
// as they are, and a set of the namespace's tag names:
//
//	{idemq:orders}:segment   hash  max_id       end of the last segment reserved
//	                               step         the stored step
//	                               max_limit    the highest max_id may reach; 0 for none
//	                               description  for operators
//	                               update_time  ms since the Unix epoch, by the server's TIME
//	{idemq}:segment-tags     set   every tag name of the namespace, for Tags
//
// NextSegment runs one script (one round trip) that checks the tag and its
// maximum and raises max_id with HINCRBY, the atomic step Leaf's UPDATE
// takes in MySQL. Values count in Lua numbers, so MaxID and Max are at most
// 2^53, where a tag without a maximum ends. It is safe for concurrent use by
// multiple goroutines and processes.
func NewSegments(client redis.UniversalClient, namespace string) (segment.Store, error) {
	if client == nil {
		return nil, errors.New("redisidgen: nil client")
	}
	if namespace == "" {
		namespace = "idemq"
	}
	return &segments{client: client, namespace: namespace, index: rediskey.HashTag(namespace) + ":segment-tags", topArg: strconv.FormatInt(maxSegmentValue, 10)}, nil
}

// segments is the store NewSegments returns.
type segments struct {
	client    redis.UniversalClient
	namespace string
	// index is the set of the namespace's tag names, for Tags.
	index  string
	topArg string
}

// key returns the Redis key of tag's hash: {<namespace>:<tag>}:segment,
// with '%', '{', '}' and ':' percent-encoded in both parts.
func (s *segments) key(tag string) string { return rediskey.HashTag(s.namespace, tag) + ":segment" }

// NextSegment reserves the next segment of tag, as [segment.Store]
// says, in one script run (EVALSHA): HINCRBY of the tag's max_id, after
// checking the tag exists and its maximum. A tag without a maximum ends at
// 2^53.
func (s *segments) NextSegment(ctx context.Context, tag string, step int64) (segment.Segment, error) {
	fail := func(err error) (segment.Segment, error) {
		return segment.Segment{}, fmt.Errorf("redisidgen: next segment of tag %q: %w", tag, err)
	}
	if step < 0 {
		return fail(fmt.Errorf("step %d: want a positive step, or 0 for the tag's own: %w", step, idgen.ErrInvalidConfig))
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	vals, err := s.run(ctx, nextSegmentScript, tag, strconv.FormatInt(step, 10), s.topArg)
	if err != nil {
		return fail(err)
	}
	switch code(vals) {
	case codeOK:
		return segment.Segment{Start: num(vals, 1), End: num(vals, 2), Step: num(vals, 3), Max: num(vals, 4)}, nil
	case codeUnknown:
		return fail(s.unknown())
	case codeMax:
		return fail(fmt.Errorf("every ID below its maximum %d is taken: %w", num(vals, 2), segment.ErrMaxReached))
	case codeBadStep:
		return fail(fmt.Errorf("the tag's stored step is %d: give it a positive step in %s: %w", num(vals, 1), s.key(tag), idgen.ErrInvalidConfig))
	}
	return fail(fmt.Errorf("unexpected script answer %v", vals))
}

func (s *segments) unknown() error {
	return fmt.Errorf("no such tag in namespace %q: %w", s.namespace, segment.ErrUnknownTag)
}

// run runs script over tag's hash.
func (s *segments) run(ctx context.Context, script *redis.Script, tag string, args ...any) ([]any, error) {
	vals, err := script.Run(ctx, s.client, []string{s.key(tag)}, args...).Slice()
	if err != nil {
		return nil, err
	}
	if len(vals) == 0 {
		return nil, errors.New("empty script answer")
	}
	return vals, nil
}

func code(vals []any) string {
	c, _ := vals[0].(string)
	return c
}

func num(vals []any, i int) int64 {
	if i < len(vals) {
		n, _ := vals[i].(int64)
		return n
	}
	return 0
}

// CreateTag records a new tag whose first segment starts at tag.MaxID, with
// tag.Step (1 to 2^31-1, as sqlidgen's INT column) and tag.Max (0 for none,
// else at least MaxID); MaxID and Max at most 2^53. The name is
// 1 to 128 bytes of UTF-8; a Description longer than 256 bytes is cut;
// Updated is ignored. A tag that exists fails with [segment.ErrTagExists],
// unchanged. It adds the name to the namespace's index first, in a command
// of its own (the index lives in another cluster slot), so a tag is never
// missing from Tags.
func (s *segments) CreateTag(ctx context.Context, tag segment.Tag) error {
	fail := func(err error) error { return fmt.Errorf("redisidgen: create tag %q: %w", tag.Tag, err) }
	if err := checkTag(tag); err != nil {
		return fail(err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if err := s.client.SAdd(ctx, s.index, tag.Tag).Err(); err != nil {
		return fail(err)
	}
	vals, err := s.run(ctx, createTagScript, tag.Tag, tag.MaxID, tag.Step, tag.Max, clip(tag.Description, segtag.MaxDescriptionLen))
	switch {
	case err != nil:
		return fail(err)
	case code(vals) == codeExists:
		return fail(fmt.Errorf("in namespace %q: %w", s.namespace, segment.ErrTagExists))
	case code(vals) != codeOK:
		return fail(fmt.Errorf("unexpected script answer %v", vals))
	}
	return nil
}

// checkTag checks a tag to create: idgen's rules, and values Lua numbers
// hold exactly.
func checkTag(t segment.Tag) error {
	if err := segtag.Validate(t); err != nil {
		return err
	}
	if t.MaxID > maxSegmentValue || t.Max > maxSegmentValue {
		return fmt.Errorf("MaxID %d and Max %d: want at most 2^53 in Redis: %w", t.MaxID, t.Max, idgen.ErrInvalidConfig)
	}
	return nil
}

// clip returns s as valid UTF-8 of at most n bytes, cut at a character
// boundary.
func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// tagFields are the hash fields Tag reads, in scanTag's order.
var tagFields = []string{fieldMaxID, fieldStep, fieldMaxLimit, fieldDescription, fieldUpdateTime}

// Tag returns tag's record, or fails with [segment.ErrUnknownTag].
func (s *segments) Tag(ctx context.Context, tag string) (segment.Tag, error) {
	fail := func(err error) (segment.Tag, error) {
		return segment.Tag{}, fmt.Errorf("redisidgen: read tag %q: %w", tag, err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	vals, err := s.client.HMGet(ctx, s.key(tag), tagFields...).Result()
	if err != nil {
		return fail(err)
	}
	t, ok := scanTag(tag, vals)
	if !ok {
		return fail(s.unknown())
	}
	return t, nil
}

// scanTag reads a tag's record from HMGET's answer; ok is false when the
// hash is missing.
func scanTag(tag string, vals []any) (t segment.Tag, ok bool) {
	if len(vals) != len(tagFields) || vals[0] == nil {
		return segment.Tag{}, false
	}
	field := func(i int) string { v, _ := vals[i].(string); return v }
	n := func(i int) int64 { v, _ := strconv.ParseInt(field(i), 10, 64); return v }
	t = segment.Tag{Tag: tag, MaxID: n(0), Step: n(1), Max: n(2), Description: field(3)}
	if ms := n(4); ms != 0 {
		t.Updated = time.UnixMilli(ms).UTC()
	}
	return t, true
}

// Tags returns every tag's record in the namespace, sorted by name, byte for
// byte: the members of the index set whose hash exists.
func (s *segments) Tags(ctx context.Context) ([]segment.Tag, error) {
	fail := func(err error) ([]segment.Tag, error) {
		return nil, fmt.Errorf("redisidgen: list tags of namespace %q: %w", s.namespace, err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	names, err := s.client.SMembers(ctx, s.index).Result()
	if err != nil {
		return fail(err)
	}
	slices.Sort(names)
	pipe := s.client.Pipeline()
	cmds := make([]*redis.SliceCmd, len(names))
	for i, name := range names {
		cmds[i] = pipe.HMGet(ctx, s.key(name), tagFields...)
	}
	if len(names) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return fail(err)
		}
	}
	var out []segment.Tag // in names' order, sorted
	for i, name := range names {
		// A name without a hash is left from a CreateTag that failed.
		if t, ok := scanTag(name, cmds[i].Val()); ok {
			out = append(out, t)
		}
	}
	return out, nil
}

// SetMax sets tag's maximum to max, at most 2^53; 0 removes
// it. A max below the tag's MaxID fails with [idgen.ErrInvalidConfig] and
// changes nothing: the IDs up to MaxID-1 were handed out already. An
// unknown tag fails with [segment.ErrUnknownTag].
func (s *segments) SetMax(ctx context.Context, tag string, max int64) error {
	fail := func(err error) error {
		return fmt.Errorf("redisidgen: set the maximum of tag %q to %d: %w", tag, max, err)
	}
	if max < 0 || max > maxSegmentValue {
		return fail(fmt.Errorf("want 0 for no maximum, or 1 to 2^53: %w", idgen.ErrInvalidConfig))
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	vals, err := s.run(ctx, setMaxScript, tag, max)
	if err != nil {
		return fail(err)
	}
	switch code(vals) {
	case codeOK:
		return nil
	case codeUnknown:
		return fail(s.unknown())
	case codeBelow:
		maxID := num(vals, 1)
		return fail(fmt.Errorf("its MaxID is %d, and IDs up to %d were handed out already; want 0 or at least %d: %w",
			maxID, maxID-1, maxID, idgen.ErrInvalidConfig))
	}
	return fail(fmt.Errorf("unexpected script answer %v", vals))
}
