package sqldedupe

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/idemq/idemq/dedupe"
)

// A sqlDialect speaks one database's SQL. The Store validates everything first;
// a dialect only builds and runs statements, from the pieces of
// [sqldialect.Syntax]: every time a statement compares or stores is the
// database's own now, read once per statement.
type sqlDialect interface {
	// schema returns the DDL that creates the table and its index.
	schema() []string
	// upsert inserts rows, or takes over their keys' records whose lease or
	// retention has ended, as processing for each row's lease, and returns
	// for every key the record that answers it: the row's own, or the live
	// record the statement kept (which may have ended since, if read by a
	// later statement). rows hold distinct keys.
	upsert(ctx context.Context, r runner, rows []upsertRow) (map[dedupe.Ref]record, error)
	// claimTx claims row's key as the first statement of r's transaction:
	// as upsert, but the record it writes is done, kept for row.lease,
	// and a wait for another transaction's lock on the key's row is bounded
	// by the Store's lock timeout where the database allows.
	claimTx(ctx context.Context, r runner, row upsertRow) (record, error)
	// claimTxSQL is the statement the next claimTx sends.
	claimTxSQL() string
	// complete marks the records ts own done for retention and reports which
	// keys ts owned. ts hold distinct keys.
	complete(ctx context.Context, r runner, ts []dedupe.Ticket, retention time.Duration) (map[dedupe.Ref]bool, error)
	// release ends the processing records ts own, deleting them or leaving
	// them expired, and reports which keys ts owned. ts hold distinct keys.
	release(ctx context.Context, r runner, ts []dedupe.Ticket) (map[dedupe.Ref]bool, error)
	// extend moves the end of the lease t owns and reports whether it did.
	extend(ctx context.Context, r runner, t dedupe.Ticket, lease time.Duration) (bool, error)
	// cleanup deletes at most limit expired records.
	cleanup(ctx context.Context, r runner, limit int) (int64, error)
}

// scanRecords reads the rows an upsert returns: namespace, grp, k, state,
// token, fingerprint, then expires_at and the database's now in µs since the
// Unix epoch.
func scanRecords(rows *sql.Rows) (map[dedupe.Ref]record, error) {
	defer rows.Close()
	recs := map[dedupe.Ref]record{}
	for rows.Next() {
		var (
			ref dedupe.Ref
			rec record
		)
		if err := rows.Scan(&ref.Namespace, &ref.Group, &ref.Key, &rec.state, &rec.token, &rec.fp, &rec.expires, &rec.now); err != nil {
			return nil, err
		}
		recs[ref] = rec
	}
	return recs, rows.Err()
}

// scanRefs reads rows of namespace, grp, k.
func scanRefs(rows *sql.Rows) (map[dedupe.Ref]bool, error) {
	defer rows.Close()
	refs := map[dedupe.Ref]bool{}
	for rows.Next() {
		var ref dedupe.Ref
		if err := rows.Scan(&ref.Namespace, &ref.Group, &ref.Key); err != nil {
			return nil, err
		}
		refs[ref] = true
	}
	return refs, rows.Err()
}

// list returns n copies of item separated by commas.
func list(item string, n int) string {
	return strings.TrimSuffix(strings.Repeat(item+", ", n), ", ")
}

// takeover returns the assignments of an upsert's DO UPDATE SET clause for
// PostgreSQL and SQLite: every column keeps its value while the existing
// record is live and takes the proposed row's once it has expired. Both
// dialects evaluate all assignments against the old row and now is read
// once per statement, so the columns cannot disagree.
func takeover(old, now string) string {
	var b strings.Builder
	for i, col := range []string{"state", "token", "fingerprint", "expires_at", "created_at", "updated_at"} {
		if i > 0 {
			b.WriteString(",\n\t")
		}
		b.WriteString(col + " = CASE WHEN " + old + "expires_at > " + now + " THEN " + old + col + " ELSE excluded." + col + " END")
	}
	return b.String()
}

// ticketArgs appends each ticket's key and token to args.
func ticketArgs(ts []dedupe.Ticket, args []any) []any {
	for _, t := range ts {
		args = append(args, t.Namespace, t.Group, t.Key, t.Token)
	}
	return args
}

// affected reports whether a statement on one key's row changed it.
func affected(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}
