package sqlidgen

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/internal/segtag"
	"github.com/idemq/idemq/internal/sqldialect"
)

// defaultSegmentTable is the table of tags unless NewSegments names
// another.
const defaultSegmentTable = "idemq_segment"

// Segments is a [segment.Store] over Meituan Leaf's table of tags: a row
// per tag (biz_tag) holding the end of the last segment reserved (max_id),
// the step, a description, the database's time of the last change
// (update_time) and one column Leaf lacks, max_limit, the highest value
// max_id may reach (0 for none). Where Leaf reserves a segment with an
// UPDATE and a SELECT in a transaction, NextSegment reserves the same one
// with a single UPDATE. It is safe for concurrent use by multiple
// goroutines and processes sharing the table.
//
// Leaf's servers and this package can share Leaf's table (MySQL) once it
// has the column,
//
//	ALTER TABLE leaf_alloc ADD COLUMN max_limit BIGINT NOT NULL DEFAULT 0;
//
// with NewSegments(db, d, "leaf_alloc"); Leaf ignores the maximum, so a
// tag with one should be served by this package only.
type Segments struct {
	db    *sql.DB
	d     sqldialect.Dialect
	table string
	q     segmentSQL

	mu sync.Mutex
	// next is q.next prepared, so that a segment costs one round trip
	// with every driver; nil until the first segment.
	next *sql.Stmt
	// known holds the step and maximum each tag had when this Segments
	// last read its row: on MySQL, whose UPDATE returns only the new
	// max_id, they fill in a segment's Step and Max.
	known map[string]tagLimits
}

// tagLimits are a tag's stored step and maximum.
type tagLimits struct{ step, max int64 }

var (
	_ segment.Store = (*Segments)(nil)
)

// NewSegments returns the segment store of table over db, which speaks d
// (see [New]). table follows the rules of [Config].Table; "" means
// "idemq_segment", and Leaf's table ("leaf_alloc") shares its tags with
// Leaf's servers once it has the max_limit column (see [Segments]). It does
// not touch the database: call [Segments.Migrate] to create the table, or
// create it from [Segments.Schema]. It never closes db; [Segments.Close]
// releases its prepared statement.
func NewSegments(db *sql.DB, d dialect.Dialect, table string) (*Segments, error) {
	if err := checkDB(db, d); err != nil {
		return nil, err
	}
	if table == "" {
		table = defaultSegmentTable
	}
	if !sqldialect.ValidTable(table) {
		return nil, fmt.Errorf("sqlidgen: segments table %q: want %s: %w", table, sqldialect.TableRule, idgen.ErrInvalidConfig)
	}
	return &Segments{db: db, d: d, table: table, q: newSegmentSQL(d, table), known: map[string]tagLimits{}}, nil
}

// Schema returns the statements [Segments.Migrate] runs, for migration
// tools that manage the schema themselves.
func (s *Segments) Schema() []string { return slices.Clone(s.q.ddl) }

// Migrate creates the table unless it exists.
func (s *Segments) Migrate(ctx context.Context) error {
	return migrate(ctx, s.db, s.table, s.q.ddl)
}

// Close releases the statement the Segments prepared. A later NextSegment
// prepares it again.
func (s *Segments) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next == nil {
		return nil
	}
	err := s.next.Close()
	s.next = nil
	return err
}

// NextSegment reserves the next segment of tag, as [segment.Store]
// says: one UPDATE, one round trip, when the step fits below the tag's
// maximum. Step 0 takes the stored step (on MySQL it is read once per tag
// and Segments). When the UPDATE matches no row, a read tells an unknown
// tag, a tag at its maximum, or one with fewer IDs left than the step,
// which gets them all by the same conditional UPDATE, tried again while
// other clients take IDs in between.
func (s *Segments) NextSegment(ctx context.Context, tag string, step int64) (segment.Segment, error) {
	what := fmt.Sprintf("next segment of tag %q", tag)
	if step < 0 {
		return segment.Segment{}, fmt.Errorf("sqlidgen: %s: step %d: want a positive step, or 0 for the tag's own: %w", what, step, idgen.ErrInvalidConfig)
	}
	if err := ctx.Err(); err != nil {
		return segment.Segment{}, fmt.Errorf("sqlidgen: %s: %w", what, err)
	}
	if !segtag.ValidName(tag) {
		return segment.Segment{}, s.unknown(what)
	}
	lim, known := s.limits(tag)
	n := step
	if s.d == sqldialect.MySQL && step == 0 {
		// MySQL's UPDATE cannot tell the step it took: size the
		// segment by the stored step read before, if there was one.
		n = lim.step
	}
	if s.d != sqldialect.MySQL || n > 0 {
		seg, ok, err := s.reserve(ctx, tag, n, lim, known)
		if err != nil {
			return segment.Segment{}, fail(ctx, what, err)
		}
		if ok {
			return seg, nil
		}
	}
	for {
		var maxID int64
		err := s.db.QueryRowContext(ctx, s.q.read, tag).Scan(&maxID, &lim.step, &lim.max)
		if errors.Is(err, sql.ErrNoRows) {
			return segment.Segment{}, s.unknown(what)
		}
		if err != nil {
			return segment.Segment{}, fail(ctx, what, err)
		}
		s.learn(tag, lim)
		n := cmp.Or(step, lim.step)
		if n <= 0 {
			return segment.Segment{}, fmt.Errorf("sqlidgen: %s: the tag's stored step is %d: give it a positive step in table %q: %w", what, lim.step, s.table, idgen.ErrInvalidConfig)
		}
		top := cmp.Or(lim.max, math.MaxInt64)
		if maxID >= top {
			return segment.Segment{}, fmt.Errorf("sqlidgen: %s: every ID below its maximum %d is taken: %w", what, top, segment.ErrMaxReached)
		}
		n = min(n, top-maxID)
		seg, ok, err := s.reserve(ctx, tag, n, lim, true)
		if err != nil {
			return segment.Segment{}, fail(ctx, what, err)
		}
		if ok {
			return seg, nil
		}
		// Another client took IDs, or lowered the maximum, between the
		// read and the UPDATE: read again.
	}
}

// reserve runs the conditional UPDATE, raising tag's max_id by n (the
// stored step when n is 0, except on MySQL). ok is false when it matched no
// row. lim is what the caller knows of the tag's step and maximum: on MySQL
// they fill in the segment, known or not.
func (s *Segments) reserve(ctx context.Context, tag string, n int64, lim tagLimits, known bool) (seg segment.Segment, ok bool, err error) {
	stmt, err := s.stmt(ctx)
	if err != nil {
		return segment.Segment{}, false, err
	}
	if s.d == sqldialect.MySQL {
		res, err := stmt.ExecContext(ctx, n, tag, n)
		if err != nil {
			return segment.Segment{}, false, err
		}
		// One row: its max_id went up by n > 0, so it changed even
		// without clientFoundRows.
		if rows, err := res.RowsAffected(); err != nil || rows != 1 {
			return segment.Segment{}, false, err
		}
		end, err := res.LastInsertId()
		if err != nil {
			return segment.Segment{}, false, err
		}
		if !known {
			// Step was given, but this Segments has not read the
			// tag's step and maximum yet: the only extra round trip
			// on MySQL, once per tag.
			if err := s.db.QueryRowContext(ctx, s.q.read, tag).Scan(new(int64), &lim.step, &lim.max); err != nil {
				return segment.Segment{}, false, err
			}
			s.learn(tag, lim)
		}
		return segment.Segment{Start: end - n, End: end, Step: lim.step, Max: lim.max}, true, nil
	}
	var end int64
	err = stmt.QueryRowContext(ctx, n, tag, n).Scan(&end, &lim.step, &lim.max)
	if errors.Is(err, sql.ErrNoRows) {
		return segment.Segment{}, false, nil
	}
	if err != nil {
		return segment.Segment{}, false, err
	}
	n = cmp.Or(n, lim.step)
	if n <= 0 {
		return segment.Segment{}, false, fmt.Errorf("the tag's stored step is %d: give it a positive step in table %q: %w", lim.step, s.table, idgen.ErrInvalidConfig)
	}
	return segment.Segment{Start: end - n, End: end, Step: lim.step, Max: lim.max}, true, nil
}

// stmt returns the prepared UPDATE, preparing it first if need be.
func (s *Segments) stmt(ctx context.Context) (*sql.Stmt, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next == nil {
		st, err := s.db.PrepareContext(ctx, s.q.next)
		if err != nil {
			return nil, err
		}
		s.next = st
	}
	return s.next, nil
}

// limits returns what this Segments last read of tag's step and maximum.
func (s *Segments) limits(tag string) (tagLimits, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lim, ok := s.known[tag]
	return lim, ok
}

func (s *Segments) learn(tag string, lim tagLimits) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.known[tag] = lim
}

// CreateTag records a new tag whose first segment starts at tag.MaxID, with
// tag.Step (1 to 2^31-1, Leaf's INT column) and tag.Max (0 for none, else at
// least MaxID). The name is 1 to 128 bytes of UTF-8, compared byte for
// byte; a Description longer than 256 bytes is cut; Updated is ignored. A
// tag that exists fails with [segment.ErrTagExists], unchanged.
func (s *Segments) CreateTag(ctx context.Context, tag segment.Tag) error {
	what := fmt.Sprintf("create tag %q", tag.Tag)
	if err := segtag.Validate(tag); err != nil {
		return fmt.Errorf("sqlidgen: %s: %w", what, err)
	}
	_, err := s.db.ExecContext(ctx, s.q.create, tag.Tag, tag.MaxID, tag.Step, tag.Max, clip(tag.Description, segtag.MaxDescriptionLen))
	if err == nil {
		return nil
	}
	// Whatever the driver calls a duplicate key, the row tells.
	if _, rerr := s.Tag(ctx, tag.Tag); rerr == nil {
		return fmt.Errorf("sqlidgen: %s in table %q: %w", what, s.table, segment.ErrTagExists)
	}
	return fail(ctx, what, err)
}

// unknown reports a tag the table does not hold.
func (s *Segments) unknown(what string) error {
	return fmt.Errorf("sqlidgen: %s: no such tag in table %q: %w", what, s.table, segment.ErrUnknownTag)
}

// Tag returns tag's record, or fails with [segment.ErrUnknownTag].
func (s *Segments) Tag(ctx context.Context, tag string) (segment.Tag, error) {
	what := fmt.Sprintf("read tag %q", tag)
	if err := ctx.Err(); err != nil {
		return segment.Tag{}, fmt.Errorf("sqlidgen: %s: %w", what, err)
	}
	if !segtag.ValidName(tag) {
		return segment.Tag{}, s.unknown(what)
	}
	t, err := scanTag(s.db.QueryRowContext(ctx, s.q.tag, tag))
	if errors.Is(err, sql.ErrNoRows) {
		return segment.Tag{}, s.unknown(what)
	}
	if err != nil {
		return segment.Tag{}, fail(ctx, what, err)
	}
	return t, nil
}

// Tags returns every tag's record, sorted by name, byte for byte.
func (s *Segments) Tags(ctx context.Context) ([]segment.Tag, error) {
	rows, err := s.db.QueryContext(ctx, s.q.tags)
	if err != nil {
		return nil, fail(ctx, "list tags", err)
	}
	defer rows.Close()
	var out []segment.Tag
	for rows.Next() {
		t, err := scanTag(rows)
		if err != nil {
			return nil, fail(ctx, "list tags", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fail(ctx, "list tags", err)
	}
	slices.SortFunc(out, func(a, b segment.Tag) int { return cmp.Compare(a.Tag, b.Tag) })
	return out, nil
}

func scanTag(row interface{ Scan(...any) error }) (segment.Tag, error) {
	var (
		t       segment.Tag
		updated int64
	)
	if err := row.Scan(&t.Tag, &t.MaxID, &t.Step, &t.Max, &t.Description, &updated); err != nil {
		return segment.Tag{}, err
	}
	t.Updated = time.UnixMicro(updated).UTC()
	return t, nil
}

// SetMax sets tag's maximum to max; 0 removes it. A max below the tag's
// MaxID fails with [idgen.ErrInvalidConfig] and changes nothing: the IDs up
// to MaxID-1 were handed out already. An unknown tag fails with
// [segment.ErrUnknownTag].
func (s *Segments) SetMax(ctx context.Context, tag string, max int64) error {
	what := fmt.Sprintf("set the maximum of tag %q to %d", tag, max)
	if max < 0 {
		return fmt.Errorf("sqlidgen: %s: want 0 for no maximum, or a positive one: %w", what, idgen.ErrInvalidConfig)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlidgen: %s: %w", what, err)
	}
	if !segtag.ValidName(tag) {
		return s.unknown(what)
	}
	changed, err := affected(s.db.ExecContext(ctx, s.q.setMax, max, tag, max, max))
	if err != nil {
		return fail(ctx, what, err)
	}
	if changed {
		s.forget(tag)
		return nil
	}
	// No row changed: the tag is unknown, its MaxID is above max, or
	// (MySQL without clientFoundRows) its maximum was max already.
	var maxID, limit int64
	err = s.db.QueryRowContext(ctx, s.q.read, tag).Scan(&maxID, new(int64), &limit)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return s.unknown(what)
	case err != nil:
		return fail(ctx, what, err)
	case max > 0 && maxID > max:
		return fmt.Errorf("sqlidgen: %s: its MaxID is %d, and IDs up to %d were handed out already; want 0 or at least %d: %w",
			what, maxID, maxID-1, maxID, idgen.ErrInvalidConfig)
	case limit != max:
		// The row changed between the UPDATE and the read.
		return s.SetMax(ctx, tag, max)
	}
	s.forget(tag)
	return nil
}

// forget drops what this Segments knows of tag's limits, so that its next
// segment reads them.
func (s *Segments) forget(tag string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.known, tag)
}
