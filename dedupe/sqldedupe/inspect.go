package sqldedupe

import (
	"context"
	"database/sql"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/dedupekit"
	"github.com/idemq/idemq/internal/sqldialect"
)

var _ dedupe.Inspector = (*Store)(nil)

// inspectSQL builds the Inspector's statements in the Store's dialect.
// Each is one statement through the primary key (namespace, grp, k), and
// each reads the database's now once, so that a record shows live exactly
// when a claim would find it so.
type inspectSQL struct {
	sqldialect.Syntax
	table string // quoted
}

func (s *Store) inspectSQL() inspectSQL {
	return inspectSQL{s.syn, s.syn.Quote(s.cfg.Table)}
}

// columns are those a record is read from, after the key.
func (q inspectSQL) columns() string {
	return "state, fingerprint, " + q.UnixMicros("expires_at") + ", " + q.UnixMicros("updated_at")
}

// Get implements [dedupe.Inspector] with one SELECT.
func (s *Store) Get(ctx context.Context, ref dedupe.Ref) (dedupe.Record, bool, error) {
	what := fmt.Sprintf("get %q", ref)
	if err := start(ctx, checkRef(ref)); err != nil {
		return dedupe.Record{}, false, fmt.Errorf("sqldedupe: %s: %w", what, err)
	}
	q := s.inspectSQL()
	rows, err := runner{s: s}.query(ctx, q.Rebind(`SELECT k, `+q.columns()+` FROM `+q.table+`
WHERE namespace = ? AND grp = ? AND k = ? AND expires_at > `+q.Now()), ref.Namespace, ref.Group, ref.Key)
	if err != nil {
		return dedupe.Record{}, false, fail(ctx, what, err)
	}
	recs, err := scanInspected(rows, ref.Namespace, ref.Group)
	if err != nil {
		return dedupe.Record{}, false, fail(ctx, what, err)
	}
	if len(recs) == 0 {
		return dedupe.Record{}, false, nil
	}
	return recs[0], true, nil
}

// List implements [dedupe.Inspector] with one SELECT per page: keyset
// pagination on the primary key from the last key listed, the prefix as a
// range of keys rather than a LIKE (in which '%' and '_' are wildcards),
// which the index serves on every dialect since keys compare byte for
// byte. The cursor is the last key listed, in base64url.
func (s *Store) List(ctx context.Context, req dedupe.ListRequest) ([]dedupe.Record, string, error) {
	what := fmt.Sprintf("list %q", req.Namespace+"/"+req.Group+"/"+req.Prefix+"*")
	if err := start(ctx, dedupekit.CheckList(req.Namespace, req.Group, req.Prefix, req.Limit)); err != nil {
		return nil, "", fmt.Errorf("sqldedupe: %s: %w", what, err)
	}
	after, err := dedupekit.ParseKeyCursor(req.Cursor)
	if err != nil {
		return nil, "", fmt.Errorf("sqldedupe: %s: %w", what, err)
	}
	limit := req.Limit
	if limit == 0 {
		limit = dedupekit.DefaultListLimit
	}
	q := s.inspectSQL()
	text := `SELECT k, ` + q.columns() + ` FROM ` + q.table + `
WHERE namespace = ? AND grp = ? AND k > ? AND k >= ? AND expires_at > ` + q.Now()
	args := []any{req.Namespace, req.Group, after, req.Prefix}
	if end, ok := above(req.Prefix); ok {
		text += ` AND k < ?`
		args = append(args, end)
	}
	// One more than the page tells whether another follows.
	rows, err := runner{s: s}.query(ctx, q.Rebind(text+` ORDER BY k LIMIT ?`), append(args, limit+1)...)
	if err != nil {
		return nil, "", fail(ctx, what, err)
	}
	page, err := scanInspected(rows, req.Namespace, req.Group)
	if err != nil {
		return nil, "", fail(ctx, what, err)
	}
	if len(page) <= limit {
		return page, "", nil
	}
	page = page[:limit]
	return page, dedupekit.KeyCursor(page[limit-1].Ref.Key), nil
}

// scanInspected reads rows of k then [inspectSQL.columns] as records of a
// group.
func scanInspected(rows *sql.Rows, namespace, group string) ([]dedupe.Record, error) {
	defer rows.Close()
	var recs []dedupe.Record
	for rows.Next() {
		var (
			state            string
			expires, updated int64
		)
		rec := dedupe.Record{Ref: dedupe.Ref{Namespace: namespace, Group: group}}
		if err := rows.Scan(&rec.Ref.Key, &state, &rec.Fingerprint, &expires, &updated); err != nil {
			return nil, err
		}
		rec.Done = state == stateDone
		rec.Expires, rec.Updated = time.UnixMicro(expires), time.UnixMicro(updated)
		recs = append(recs, rec)
	}
	return recs, rows.Err()
}

// Stats implements [dedupe.Inspector] with one COUNT grouped by state over
// the group's range of the primary key: O(the group's records).
func (s *Store) Stats(ctx context.Context, namespace, group string) (dedupe.Stats, error) {
	what := fmt.Sprintf("stats %q", namespace+"/"+group)
	if err := start(ctx, dedupekit.CheckList(namespace, group, "", 0)); err != nil {
		return dedupe.Stats{}, fmt.Errorf("sqldedupe: %s: %w", what, err)
	}
	q := s.inspectSQL()
	rows, err := runner{s: s}.query(ctx, q.Rebind(`SELECT state, COUNT(*) FROM `+q.table+`
WHERE namespace = ? AND grp = ? AND expires_at > `+q.Now()+` GROUP BY state`), namespace, group)
	if err != nil {
		return dedupe.Stats{}, fail(ctx, what, err)
	}
	defer rows.Close()
	var st dedupe.Stats
	for rows.Next() {
		var (
			state string
			n     int64
		)
		if err := rows.Scan(&state, &n); err != nil {
			return dedupe.Stats{}, fail(ctx, what, err)
		}
		if state == stateDone {
			st.Done += n
		} else {
			st.Processing += n
		}
	}
	if err := rows.Err(); err != nil {
		return dedupe.Stats{}, fail(ctx, what, err)
	}
	return st, nil
}

// Forget implements [dedupe.Inspector] with one DELETE of the live record;
// an expired row is left to a claim or the cleanup. A holder's Complete
// then finds no row its token owns.
func (s *Store) Forget(ctx context.Context, ref dedupe.Ref) (bool, error) {
	what := fmt.Sprintf("forget %q", ref)
	if err := start(ctx, checkRef(ref)); err != nil {
		return false, fmt.Errorf("sqldedupe: %s: %w", what, err)
	}
	q := s.inspectSQL()
	r := runner{s: s}
	ok, err := alone(ctx, r, func() (bool, error) {
		return affected(r.exec(ctx, q.Rebind(`DELETE FROM `+q.table+`
WHERE namespace = ? AND grp = ? AND k = ? AND expires_at > `+q.Now()), ref.Namespace, ref.Group, ref.Key))
	})
	if err != nil {
		return false, fail(ctx, what, err)
	}
	return ok, nil
}

// above returns the least string above every string that begins with
// prefix, in byte order, or false if there is none (prefix is empty or all
// U+10FFFF): prefix with its last character that can be raised raised by
// one and the rest cut. Byte order of UTF-8 is code point order, and the
// result is valid UTF-8, which PostgreSQL's text needs.
func above(prefix string) (string, bool) {
	rs := []rune(prefix)
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i] == utf8.MaxRune {
			continue
		}
		r := rs[i] + 1
		if r == 0xD800 { // surrogates are no characters
			r = 0xE000
		}
		return string(rs[:i]) + string(r), true
	}
	return "", false
}
