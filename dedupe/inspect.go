package dedupe

import (
	"context"
	"time"
)

// A Record is what a store holds for one Ref, as an operator sees it.
type Record struct {
	Ref Ref
	// Done is true for a completed key kept for its retention, false for
	// one held by a live lease.
	Done bool
	// Fingerprint is the payload fingerprint the key was claimed with;
	// empty if none.
	Fingerprint string
	// Expires is when the record ends by the store's clock: the lease's
	// end while processing, the retention's once done.
	Expires time.Time
	// Updated is when the record was last written, by the store's clock;
	// zero where the store does not keep it (Redis).
	Updated time.Time // Trace is, for a done record, the run that completed it (see
	// [Ticket.Trace]); empty where the store does not keep it (SQL).
	Trace string
}

// ListRequest selects the records of one consumer group.
type ListRequest struct {
	Namespace string
	Group     string
	// Prefix, if not empty, keeps the keys that begin with it (byte for
	// byte: no wildcard).
	Prefix string
	// Cursor continues a listing: pass the next cursor of the previous
	// page, or "" to start.
	Cursor string
	// Limit caps the records of a page; 0 means 100. On
	// Redis it is a hint, as SCAN's COUNT is: a page may hold a few more.
	Limit int
}

// Stats counts the live records of one consumer group: a snapshot, as
// [Inspector.Stats] returns it.
type Stats struct {
	Processing, Done int64
}

// An Inspector lets an operator see and forget records: the `idemq dedupe`
// commands use it. Every store of this module implements it beside Store.
//
// Get returns the live record of ref, or ok false if there is none (never
// claimed, released, or expired by the store's clock). List returns a page
// of the live records of req's group, at most req.Limit, and the cursor of
// the next page, "" after the last. Pages of SQL and memory stores are in
// byte order of the key. Those of Redis are in the order a SCAN finds the
// keys: a Redis page may hold fewer than Limit records, even none, with
// more to come, or a few more; a key written during a listing may be
// listed or not, and one that is there throughout is listed at least once,
// twice if Redis resizes its table meanwhile (Stats may count it twice
// then). Stats counts the group's live records. Forget deletes the record
// of ref whatever its state, so that the next delivery of the key runs its
// handler again — the tool for reprocessing after a bad deploy — and
// reports whether there was one. A holder of a forgotten lease then fails
// its Complete with ErrLeaseLost. Refs, and the namespace, group and
// prefix of a listing, are validated as for Store (msgkey.ErrInvalid).
//
// Stats and List over Redis scan every key of the Redis node that holds
// the group: O(keys) work on the server, in steps, without blocking it.
type Inspector interface {
	Get(ctx context.Context, ref Ref) (rec Record, ok bool, err error)
	List(ctx context.Context, req ListRequest) (page []Record, next string, err error)
	Stats(ctx context.Context, namespace, group string) (Stats, error)
	Forget(ctx context.Context, ref Ref) (bool, error)
}
