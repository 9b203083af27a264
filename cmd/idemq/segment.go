package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/redisidgen"
	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/idgen/sqlidgen"
)

func segmentCmd(ctx context.Context, e *env, args []string) error {
	return dispatch(ctx, e, "idemq segment", "Manage segment tags (Leaf's segment mode) in Redis or SQL.", []subcommand{
		{"show", "show one tag, or every tag: next ID, step, maximum", segmentShow},
		{"create", "create a tag", segmentCreate},
		{"set-max", "set a tag's maximum (0 removes it)", segmentSetMax},
	}, args)
}

// segmentFlags are the flags every segment subcommand shares.
type segmentFlags struct {
	*flags
	store, namespace, table *string
}

func newSegmentFlags(path, synopsis, doc string) *segmentFlags {
	f := &segmentFlags{flags: newFlags(path, synopsis, doc)}
	f.store = storeFlag(f.FlagSet)
	f.namespace = f.String("namespace", "idemq", "Redis key `namespace` of the tags")
	f.table = f.String("table", segmentTable, "SQL `table` of the tags (Leaf's is leaf_alloc)")
	return f
}

// segmentStore is what the Redis and SQL segment sources both are: serve
// issues from it, the segment commands administer its tags.
type segmentStore interface {
	segment.Store
}

// open opens the segment source named by --store; create lets it create the
// SQL table (or SQLite file). The returned func closes it.
func (f *segmentFlags) open(ctx context.Context, create bool) (segmentStore, *storeAddr, func(), error) {
	addr, err := resolveStore(*f.store)
	if err != nil {
		return nil, nil, nil, err
	}
	if addr.Kind == kindRedis {
		rdb, err := addr.openRedis(ctx)
		if err != nil {
			return nil, nil, nil, err
		}
		s, err := redisidgen.NewSegments(rdb, *f.namespace)
		if err != nil {
			rdb.Close()
			return nil, nil, nil, f.usageErr("%v", err)
		}
		return s, addr, func() { rdb.Close() }, nil
	}
	db, err := addr.openSQL(ctx, create)
	if err != nil {
		return nil, nil, nil, err
	}
	s, err := sqlidgen.NewSegments(db, addr.Dialect, *f.table)
	if err != nil {
		db.Close()
		return nil, nil, nil, f.usageErr("%v", err)
	}
	closeFn := func() { s.Close(); db.Close() }
	if create {
		if err := s.Migrate(ctx); err != nil {
			closeFn()
			return nil, nil, nil, fmt.Errorf("create the tags' table at %s: %w", addr, err)
		}
	}
	return s, addr, closeFn, nil
}

// failure describes err of an operation on the source at addr, as a usage
// error when the input was at fault.
func (f *segmentFlags) failure(op string, addr *storeAddr, err error) error {
	err = fmt.Errorf("%s: %s at %s: %w", strings.TrimPrefix(f.path, "idemq "), op, addr, err)
	if addr.IsSQL() {
		err = missingTable(err, segmentsTables, *f.table)
	}
	switch {
	case errors.Is(err, idgen.ErrInvalidConfig), errors.Is(err, idgen.ErrInvalidConfig):
		// The store refused the input: exit 2, though the flags were fine.
		return usageError{err: err}
	case errors.Is(err, segment.ErrUnknownTag):
		return fmt.Errorf("%w; create it with 'idemq segment create'", err)
	}
	return err
}

// segmentTag is a tag as the segment commands print it.
type segmentTag struct {
	Tag string `json:"tag"`
	// NextID is the first ID of the next segment: the tag's max_id.
	NextID      int64  `json:"next_id"`
	Step        int64  `json:"step"`
	Max         int64  `json:"max"`
	Description string `json:"description"`
	Updated     string `json:"updated"`
}

// printTags prints tags as one JSON document or a table.
func (f *segmentFlags) printTags(e *env, tags []segment.Tag) error {
	out := struct {
		Tags []segmentTag `json:"tags"`
	}{Tags: []segmentTag{}}
	for _, t := range tags {
		out.Tags = append(out.Tags, segmentTag{t.Tag, t.MaxID, t.Step, t.Max, t.Description, fmtTime(t.Updated)})
	}
	return f.emit(e, out, func(w io.Writer) {
		fmt.Fprintln(w, "TAG\tNEXT ID\tSTEP\tMAX\tUPDATED\tDESCRIPTION")
		for _, t := range out.Tags {
			maxID := "none"
			if t.Max != 0 {
				maxID = strconv.FormatInt(t.Max, 10)
			}
			fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\t%s\n", t.Tag, t.NextID, t.Step, maxID, t.Updated, t.Description)
		}
	})
}

const segmentShowDoc = `Show a segment tag, or every tag of the store: the next ID a segment will
start at (Leaf's max_id), the step, the maximum (none, or the highest value
max_id may reach), when it last changed and its description.`

func segmentShow(ctx context.Context, e *env, args []string) error {
	f := newSegmentFlags("idemq segment show", "--store URL [flags] [TAG]", segmentShowDoc)
	rest, err := f.parse(e, args)
	if err != nil {
		return err
	}
	if len(rest) > 1 {
		return f.usageErr("want at most one tag, got %q", rest)
	}
	ctx, cancel := f.context(ctx)
	defer cancel()
	src, addr, closeFn, err := f.open(ctx, false)
	if err != nil {
		return err
	}
	defer closeFn()
	var tags []segment.Tag
	if len(rest) == 1 {
		t, err := src.Tag(ctx, rest[0])
		if err != nil {
			return f.failure(fmt.Sprintf("read tag %q", rest[0]), addr, err)
		}
		tags = append(tags, t)
	} else if tags, err = src.Tags(ctx); err != nil {
		return f.failure("list tags", addr, err)
	}
	return f.printTags(e, tags)
}

const segmentCreateDoc = `Create a segment tag whose first segment starts at --start, reserved --step
IDs at a time (the least an adaptive allocator asks for), and never past --max
(0: no maximum). A tag that exists is left as it is and the command fails.
On SQL the table is created first if it does not exist.`

func segmentCreate(ctx context.Context, e *env, args []string) error {
	f := newSegmentFlags("idemq segment create", "--store URL TAG --step N [--start S] [--max M] [--description D] [flags]", segmentCreateDoc)
	step := f.Int64("step", 0, "`IDs` per segment, at least 1 (required)")
	start := f.Int64("start", 1, "the tag's first `ID`")
	maxID := f.Int64("max", 0, "the highest value the tag's counter may reach; 0 for none")
	desc := f.String("description", "", "what the tag numbers")
	rest, err := f.parse(e, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return f.usageErr("want one tag, got %q", rest)
	}
	switch {
	case *step < 1:
		return f.usageErr("--step is required: the IDs per segment, at least 1")
	case *start < 0:
		return f.usageErr("--start %d: want 0 or more", *start)
	case *maxID != 0 && *maxID < *start:
		return f.usageErr("--max %d is below --start %d", *maxID, *start)
	}
	ctx, cancel := f.context(ctx)
	defer cancel()
	src, addr, closeFn, err := f.open(ctx, true)
	if err != nil {
		return err
	}
	defer closeFn()
	tag := segment.Tag{Tag: rest[0], MaxID: *start, Step: *step, Max: *maxID, Description: *desc}
	if err := src.CreateTag(ctx, tag); err != nil {
		return f.failure(fmt.Sprintf("create tag %q", tag.Tag), addr, err)
	}
	if tag, err = src.Tag(ctx, tag.Tag); err != nil {
		return f.failure(fmt.Sprintf("read tag %q", rest[0]), addr, err)
	}
	return f.printTags(e, []segment.Tag{tag})
}

const segmentSetMaxDoc = `Set a tag's maximum: the highest value its counter may reach, after which
allocators fail with "reached its maximum". 0 removes the maximum. A maximum
below the tag's next ID is refused: those IDs were handed out already.`

func segmentSetMax(ctx context.Context, e *env, args []string) error {
	f := newSegmentFlags("idemq segment set-max", "--store URL [flags] TAG MAX", segmentSetMaxDoc)
	rest, err := f.parse(e, args)
	if err != nil {
		return err
	}
	if len(rest) != 2 {
		return f.usageErr("want a tag and a maximum, got %q", rest)
	}
	maxID, err := strconv.ParseInt(rest[1], 10, 64)
	if err != nil || maxID < 0 {
		return f.usageErr("maximum %q: want a whole number, 0 for none", rest[1])
	}
	ctx, cancel := f.context(ctx)
	defer cancel()
	src, addr, closeFn, err := f.open(ctx, false)
	if err != nil {
		return err
	}
	defer closeFn()
	if err := src.SetMax(ctx, rest[0], maxID); err != nil {
		return f.failure(fmt.Sprintf("set the maximum of tag %q", rest[0]), addr, err)
	}
	tag, err := src.Tag(ctx, rest[0])
	if err != nil {
		return f.failure(fmt.Sprintf("read tag %q", rest[0]), addr, err)
	}
	return f.printTags(e, []segment.Tag{tag})
}
