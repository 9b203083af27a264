package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/idemq/idemq/outbox"
)

func outboxCmd(ctx context.Context, e *env, args []string) error {
	return dispatch(ctx, e, "idemq outbox", "Inspect and repair a transactional outbox table (package outbox).", []subcommand{
		{"stats", "count the rows by state; the age of the oldest pending row", outboxStats},
		{"list", "list the rows of one state, oldest first", outboxList},
		{"retry", "put parked rows back to ship", outboxRetry},
		{"park", "set pending rows aside, with a reason", outboxPark},
	}, args)
}

// outboxFlags are the flags every outbox subcommand shares.
type outboxFlags struct {
	*flags
	store, table *string
}

func newOutboxFlags(path, synopsis, doc string) *outboxFlags {
	f := &outboxFlags{flags: newFlags(path, synopsis, doc)}
	f.store = storeFlag(f.FlagSet)
	f.table = f.String("table", outbox.DefaultTable, "SQL `table` of the outbox")
	return f
}

// open opens the outbox named by --store and --table. The returned func
// closes it.
func (f *outboxFlags) open(ctx context.Context) (*outbox.Outbox, *storeAddr, func(), error) {
	addr, err := resolveStore(*f.store)
	if err != nil {
		return nil, nil, nil, err
	}
	o, closeFn, err := openOutboxAt(ctx, f.flags, addr, *f.table)
	return o, addr, closeFn, err
}

// openOutboxAt opens the outbox table of the store at addr, for the
// command whose flags are f. The returned func closes it.
func openOutboxAt(ctx context.Context, f *flags, addr *storeAddr, table string) (*outbox.Outbox, func(), error) {
	if !addr.IsSQL() {
		return nil, nil, f.usageErr("%s is a Redis store: an outbox is a table in the service's SQL database", addr)
	}
	db, err := addr.openSQL(ctx, false)
	if err != nil {
		return nil, nil, err
	}
	o, err := outbox.New(db, addr.Dialect, nil, outbox.Config{Table: table})
	if err != nil {
		db.Close()
		return nil, nil, f.usageErr("%v", err)
	}
	return o, func() { db.Close() }, nil
}

// failure describes err of an operation on the outbox at addr.
func (f *outboxFlags) failure(op string, addr *storeAddr, err error) error {
	return missingTable(fmt.Errorf("%s at %s: %w", op, addr, err), outboxTables, *f.table)
}

// ids parses the row ids of args; all says whether --all stands for them.
func (f *outboxFlags) ids(args []string, all bool) ([]int64, error) {
	switch {
	case all && len(args) > 0:
		return nil, f.usageErr("give row ids or --all, not both")
	case !all && len(args) == 0:
		return nil, f.usageErr("want row ids, or --all")
	}
	ids := make([]int64, len(args))
	for i, a := range args {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil || id <= 0 {
			return nil, f.usageErr("row id %q: want a positive whole number", a)
		}
		ids[i] = id
	}
	return ids, nil
}

const outboxStatsDoc = `Count the outbox's rows by state — pending (waiting to ship, or for a
backoff), sent (kept for their retention), parked (refused by the broker,
out of attempts, or parked here) — and give the age of the oldest pending
row, by the database's clock.`

func outboxStats(ctx context.Context, e *env, args []string) error {
	f := newOutboxFlags("idemq outbox stats", "--store URL [flags]", outboxStatsDoc)
	rest, err := f.parse(e, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return f.usageErr("unexpected arguments %q", rest)
	}
	ctx, cancel := f.context(ctx)
	defer cancel()
	o, addr, closeFn, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	st, err := o.Count(ctx)
	if err != nil {
		return f.failure("outbox stats", addr, err)
	}
	out := struct {
		Pending          int64   `json:"pending"`
		Sent             int64   `json:"sent"`
		Parked           int64   `json:"parked"`
		OldestPendingSec float64 `json:"oldest_pending_seconds"`
	}{st.Pending, st.Sent, st.Parked, st.OldestPending.Seconds()}
	return f.emit(e, out, func(w io.Writer) {
		fmt.Fprintln(w, "PENDING\tSENT\tPARKED\tOLDEST PENDING")
		fmt.Fprintf(w, "%d\t%d\t%d\t%v\n", out.Pending, out.Sent, out.Parked, st.OldestPending.Round(time.Millisecond))
	})
}

// outboxRow is a row as the outbox commands print it.
type outboxRow struct {
	ID          int64   `json:"id"`
	State       string  `json:"state"`
	Key         string  `json:"key"`
	Topic       string  `json:"topic"`
	OrderingKey string  `json:"ordering_key"`
	Attempts    int     `json:"attempts"`
	LastError   string  `json:"last_error"`
	AgeSec      float64 `json:"age_seconds"`
}

const outboxListDoc = `List the outbox's rows in one state (--state: pending, sent or parked),
oldest first, at most --limit of them after row --after: its message key,
topic, ordering key, failed attempts and the last failure's (or parking's)
reason.`

func outboxList(ctx context.Context, e *env, args []string) error {
	f := newOutboxFlags("idemq outbox list", "--store URL [--state S] [--after ID] [--limit N] [flags]", outboxListDoc)
	state := f.String("state", "parked", "rows in `state` pending, sent or parked")
	after := f.Int64("after", 0, "list the rows after row `ID`")
	limit := f.Int("limit", 100, "list at most `N` rows")
	rest, err := f.parse(e, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return f.usageErr("unexpected arguments %q", rest)
	}
	var s outbox.State
	switch *state {
	case "pending":
		s = outbox.Pending
	case "sent":
		s = outbox.Sent
	case "parked":
		s = outbox.Parked
	default:
		return f.usageErr("--state %q: want pending, sent or parked", *state)
	}
	if *limit < 1 {
		return f.usageErr("--limit %d: want 1 or more", *limit)
	}
	ctx, cancel := f.context(ctx)
	defer cancel()
	o, addr, closeFn, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	rows, err := o.List(ctx, s, *after, *limit)
	if err != nil {
		return f.failure("outbox list", addr, err)
	}
	out := struct {
		Rows []outboxRow `json:"rows"`
	}{Rows: []outboxRow{}}
	for _, r := range rows {
		out.Rows = append(out.Rows, outboxRow{r.ID, string(r.State), r.Key, r.Topic, r.OrderingKey, r.Attempts, r.LastError, r.Age.Seconds()})
	}
	return f.emit(e, out, func(w io.Writer) {
		fmt.Fprintln(w, "ID\tSTATE\tKEY\tTOPIC\tORDERING KEY\tATTEMPTS\tAGE\tLAST ERROR")
		for i, r := range out.Rows {
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%d\t%v\t%s\n", r.ID, r.State, r.Key, r.Topic, r.OrderingKey, r.Attempts, rows[i].Age.Round(time.Millisecond), r.LastError)
		}
	})
}

const outboxRetryDoc = `Put parked rows back to ship at once, their failed attempts forgotten: the
rows named by id, or every parked row with --all. A retried row ships behind
the pending rows of its ordering key that came before it.`

func outboxRetry(ctx context.Context, e *env, args []string) error {
	f := newOutboxFlags("idemq outbox retry", "--store URL (--all | ID...) [flags]", outboxRetryDoc)
	all := f.Bool("all", false, "retry every parked row")
	rest, err := f.parse(e, args)
	if err != nil {
		return err
	}
	ids, err := f.ids(rest, *all)
	if err != nil {
		return err
	}
	return f.change(ctx, e, "outbox retry", "retried", func(ctx context.Context, o *outbox.Outbox) (int64, error) { return o.Retry(ctx, ids...) })
}

const outboxParkDoc = `Set pending rows that no relay holds aside with --reason: the rows named by
id, or every pending row with --all. A parked row ships no more until
'idemq outbox retry', and holds back no row of its ordering key.`

func outboxPark(ctx context.Context, e *env, args []string) error {
	f := newOutboxFlags("idemq outbox park", "--store URL [--reason R] (--all | ID...) [flags]", outboxParkDoc)
	all := f.Bool("all", false, "park every pending row no relay holds")
	reason := f.String("reason", "parked by an operator", "the `reason` kept with the rows")
	rest, err := f.parse(e, args)
	if err != nil {
		return err
	}
	ids, err := f.ids(rest, *all)
	if err != nil {
		return err
	}
	return f.change(ctx, e, "outbox park", "parked", func(ctx context.Context, o *outbox.Outbox) (int64, error) { return o.Park(ctx, *reason, ids...) })
}

// change runs an operator's change on the outbox and prints how many rows
// it changed.
func (f *outboxFlags) change(ctx context.Context, e *env, op, did string, run func(context.Context, *outbox.Outbox) (int64, error)) error {
	ctx, cancel := f.context(ctx)
	defer cancel()
	o, addr, closeFn, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	n, err := run(ctx, o)
	if err != nil {
		return f.failure(op, addr, err)
	}
	out := map[string]int64{did: n}
	return f.emit(e, out, func(w io.Writer) {
		fmt.Fprintf(w, "%s %d rows\n", did, n)
	})
}
