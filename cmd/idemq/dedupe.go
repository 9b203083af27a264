package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/internal/dedupekit"
)

func dedupeCmd(ctx context.Context, e *env, args []string) error {
	return dispatch(ctx, e, "idemq dedupe", "Inspect a dedupe store (Redis or SQL); forget records to reprocess their keys.", []subcommand{
		{"get", "show the records of keys", dedupeGet},
		{"list", "list a consumer group's records, a page at a time", dedupeList},
		{"stats", "count a consumer group's records by state", dedupeStats},
		{"forget", "delete records so that their keys are processed again", dedupeForget},
	}, args)
}

// dedupeFlags are the flags every dedupe subcommand shares.
type dedupeFlags struct {
	*flags
	store, namespace, group, redisPrefix, table *string
}

func newDedupeFlags(path, synopsis, doc string) *dedupeFlags {
	f := dedupeStoreFlags(newFlags(path, synopsis, doc))
	f.group = f.String("group", "", "consumer `group` (required)")
	return f
}

// dedupeStoreFlags registers on f the flags that name a dedupe store and
// its records, all but --group.
func dedupeStoreFlags(f *flags) *dedupeFlags {
	return &dedupeFlags{
		flags:       f,
		store:       storeFlag(f.FlagSet),
		namespace:   f.String("namespace", "", "dedupe `namespace` (the consumer's; default none)"),
		redisPrefix: f.String("redis-prefix", "idemq:dedupe:", "`prefix` of the store's Redis keys"),
		table:       f.String("table", dedupekit.DefaultTable, "SQL `table` of the records"),
	}
}

// parse parses args and checks --group.
func (f *dedupeFlags) parse(e *env, args []string) ([]string, error) {
	rest, err := f.flags.parse(e, args)
	if err != nil {
		return nil, err
	}
	if *f.group == "" {
		return nil, f.usageErr("--group is required: the consumer group whose records to read")
	}
	return rest, nil
}

// refs returns the refs of keys, checked, so that a bad key fails before
// any store is reached.
func (f *dedupeFlags) refs(keys []string) ([]dedupe.Ref, error) {
	if len(keys) == 0 {
		return nil, f.usageErr("no keys: give the message keys as arguments")
	}
	refs := make([]dedupe.Ref, len(keys))
	for i, k := range keys {
		refs[i] = dedupe.Ref{Namespace: *f.namespace, Group: *f.group, Key: k}
		if err := dedupekit.CheckRef(refs[i].Namespace, refs[i].Group, refs[i].Key); err != nil {
			return nil, f.usageErr("%v", err)
		}
	}
	return refs, nil
}

// open opens the inspector of the store named by --store. The returned func
// closes it.
func (f *dedupeFlags) open(ctx context.Context) (dedupe.Inspector, *storeAddr, func(), error) {
	addr, err := resolveStore(*f.store)
	if err != nil {
		return nil, nil, nil, err
	}
	if addr.Kind == kindRedis {
		rdb, err := addr.openRedis(ctx)
		if err != nil {
			return nil, nil, nil, err
		}
		s, err := redisdedupe.New(rdb, redisdedupe.Config{Prefix: *f.redisPrefix})
		if err != nil {
			rdb.Close()
			return nil, nil, nil, f.usageErr("%v", err)
		}
		return s, addr, func() { rdb.Close() }, nil
	}
	db, err := addr.openSQL(ctx, false)
	if err != nil {
		return nil, nil, nil, err
	}
	// The cleanup goroutine is the consumers' job, not an operator's.
	s, err := sqldedupe.New(db, addr.Dialect, sqldedupe.Config{Table: *f.table, CleanupInterval: -1})
	if err != nil {
		db.Close()
		return nil, nil, nil, f.usageErr("%v", err)
	}
	return s, addr, func() { s.Close(); db.Close() }, nil
}

// failure describes err of an operation on the store at addr.
func (f *dedupeFlags) failure(addr *storeAddr, err error) error {
	if addr.IsSQL() {
		return missingTable(err, dedupeTables, *f.table)
	}
	return err
}

// record is one dedupe record as the dedupe commands print it.
type record struct {
	Key         string `json:"key"`
	State       string `json:"state"`
	Fingerprint string `json:"fingerprint,omitempty"`
	Expires     string `json:"expires,omitempty"`
	Updated     string `json:"updated,omitempty"`
	// Trace names the run that applied the effect (a W3C traceparent:
	// its trace id is the second field), where the store keeps it.
	Trace string `json:"trace,omitempty"`
	// Forgotten is set by forget: whether a record was deleted.
	Forgotten *bool `json:"forgotten,omitempty"`
}

// States of a record as printed; stateNone is a key without a live record.
const (
	stateProcessing = "processing"
	stateDone       = "done"
	stateNone       = "none"
)

func toRecord(key string, r dedupe.Record, ok bool) record {
	if !ok {
		return record{Key: key, State: stateNone}
	}
	st := stateProcessing
	if r.Done {
		st = stateDone
	}
	rec := record{Key: key, State: st, Fingerprint: r.Fingerprint, Expires: fmtTime(r.Expires), Trace: r.Trace}
	if !r.Updated.IsZero() {
		rec.Updated = fmtTime(r.Updated)
	}
	return rec
}

// printRecords writes records as a table.
func printRecords(w io.Writer, recs []record, forget bool) {
	fmt.Fprint(w, "KEY\tSTATE\tEXPIRES\tUPDATED\tFINGERPRINT\tAPPLIED BY")
	if forget {
		fmt.Fprint(w, "\tFORGOTTEN")
	}
	fmt.Fprintln(w)
	for _, r := range recs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s", r.Key, r.State, dash(r.Expires), dash(r.Updated), dash(r.Fingerprint), dash(r.Trace))
		if forget {
			forgot := "no (dry run)"
			if r.Forgotten != nil && *r.Forgotten {
				forgot = "yes"
			} else if r.Forgotten != nil {
				forgot = "no record"
			}
			fmt.Fprintf(w, "\t%s", forgot)
		}
		fmt.Fprintln(w)
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// errMissing reports keys without a live record: exit status 1.
var errMissing = errors.New("no live record")

const dedupeGetDoc = `Show the live record of each key in the consumer group: its state (processing
under a lease, or done and kept for the retention), when it ends by the
store's clock, when it was last written (SQL) and its payload fingerprint.
A key with no live record shows state "none" and the command exits 1.`

func dedupeGet(ctx context.Context, e *env, args []string) error {
	f := newDedupeFlags("idemq dedupe get", "--store URL --group G [flags] KEY...", dedupeGetDoc)
	keys, err := f.parse(e, args)
	if err != nil {
		return err
	}
	refs, err := f.refs(keys)
	if err != nil {
		return err
	}
	ctx, cancel := f.context(ctx)
	defer cancel()
	insp, addr, closeFn, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	recs := make([]record, len(refs))
	missing := 0
	for i, ref := range refs {
		r, ok, err := insp.Get(ctx, ref)
		if err != nil {
			return f.failure(addr, fmt.Errorf("get %s at %s: %w", ref, addr, err))
		}
		if !ok {
			missing++
		}
		recs[i] = toRecord(ref.Key, r, ok)
	}
	if err := f.emit(e, recs, func(w io.Writer) { printRecords(w, recs, false) }); err != nil {
		return err
	}
	if missing > 0 {
		return fmt.Errorf("%w for %d of %d keys in group %q", errMissing, missing, len(refs), *f.group)
	}
	return nil
}

const dedupeListDoc = `List the live records of a consumer group, a page at a time: pass the
printed cursor to --cursor for the next page, or --all to read every page.
SQL pages are in byte order of the key; Redis pages in the order SCAN finds
the keys, and may hold fewer (even no) records with more to come, so follow
the cursor until it is empty. Listing Redis scans every key of the node that
holds the group.`

func dedupeList(ctx context.Context, e *env, args []string) error {
	f := newDedupeFlags("idemq dedupe list", "--store URL --group G [flags]", dedupeListDoc)
	prefix := f.String("prefix", "", "list only the keys that begin with `P` (byte for byte, no wildcard)")
	limit := f.Int("limit", dedupekit.DefaultListLimit, "records per page (a hint on Redis)")
	cursor := f.String("cursor", "", "continue from the `cursor` a previous page printed")
	all := f.Bool("all", false, "follow the cursor to the last page")
	rest, err := f.parse(e, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return f.usageErr("unexpected arguments %q (keys go to 'idemq dedupe get')", rest)
	}
	req := dedupe.ListRequest{Namespace: *f.namespace, Group: *f.group, Prefix: *prefix, Cursor: *cursor, Limit: *limit}
	if *limit < 1 {
		return f.usageErr("--limit %d: want at least 1", *limit)
	}
	if err := dedupekit.CheckList(req.Namespace, req.Group, req.Prefix, req.Limit); err != nil {
		return f.usageErr("%v", err)
	}
	ctx, cancel := f.context(ctx)
	defer cancel()
	insp, addr, closeFn, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	out := struct {
		Records []record `json:"records"`
		Next    string   `json:"next"`
	}{Records: []record{}}
	seen := map[string]bool{} // a Redis scan may find a key twice
	for {
		page, next, err := insp.List(ctx, req)
		if err != nil {
			return f.failure(addr, fmt.Errorf("list group %q at %s: %w", *f.group, addr, err))
		}
		for _, r := range page {
			if !seen[r.Ref.Key] {
				seen[r.Ref.Key] = true
				out.Records = append(out.Records, toRecord(r.Ref.Key, r, true))
			}
		}
		out.Next = next
		if !*all || next == "" {
			break
		}
		req.Cursor = next
	}
	return f.emit(e, out, func(w io.Writer) {
		printRecords(w, out.Records, false)
		if out.Next != "" {
			fmt.Fprintf(w, "next page: --cursor %s\n", out.Next)
		}
	})
}

const dedupeStatsDoc = `Count the live records of a consumer group by state. On Redis it scans every
key of the node that holds the group.`

func dedupeStats(ctx context.Context, e *env, args []string) error {
	f := newDedupeFlags("idemq dedupe stats", "--store URL --group G [flags]", dedupeStatsDoc)
	rest, err := f.parse(e, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return f.usageErr("unexpected arguments %q", rest)
	}
	if err := dedupekit.CheckList(*f.namespace, *f.group, "", 0); err != nil {
		return f.usageErr("%v", err)
	}
	ctx, cancel := f.context(ctx)
	defer cancel()
	insp, addr, closeFn, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	st, err := insp.Stats(ctx, *f.namespace, *f.group)
	if err != nil {
		return f.failure(addr, fmt.Errorf("stats of group %q at %s: %w", *f.group, addr, err))
	}
	out := struct {
		Namespace  string `json:"namespace"`
		Group      string `json:"group"`
		Processing int64  `json:"processing"`
		Done       int64  `json:"done"`
		Total      int64  `json:"total"`
	}{*f.namespace, *f.group, st.Processing, st.Done, st.Processing + st.Done}
	return f.emit(e, out, func(w io.Writer) {
		fmt.Fprintln(w, "GROUP\tPROCESSING\tDONE\tTOTAL")
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\n", out.Group, out.Processing, out.Done, out.Total)
	})
}

// reprocessFlag is forget's confirmation: forgetting a done key runs its
// handler, and its side effects, again at its next delivery.
const reprocessFlag = "yes-reprocess"

const dedupeForgetDoc = `Delete the records of keys, whatever their state, so that the next delivery
of each key runs its handler again: the tool for reprocessing after a bad
deploy. Their side effects run again too. A consumer still holding a
forgotten lease fails its Complete (dedupe.ErrLeaseLost).

Without --yes-reprocess nothing is deleted: the command prints what it would
forget and exits 2.`

func dedupeForget(ctx context.Context, e *env, args []string) error {
	f := newDedupeFlags("idemq dedupe forget", "--store URL --group G [--yes-reprocess] [flags] KEY...", dedupeForgetDoc)
	confirm := f.Bool(reprocessFlag, false, "really delete the records, so that the keys are processed again")
	keys, err := f.parse(e, args)
	if err != nil {
		return err
	}
	refs, err := f.refs(keys)
	if err != nil {
		return err
	}
	ctx, cancel := f.context(ctx)
	defer cancel()
	insp, addr, closeFn, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	out := struct {
		DryRun  bool     `json:"dry_run"`
		Records []record `json:"records"`
	}{DryRun: !*confirm}
	n := 0
	for _, ref := range refs {
		r, ok, err := insp.Get(ctx, ref)
		if err != nil {
			return f.failure(addr, fmt.Errorf("get %s at %s: %w", ref, addr, err))
		}
		rec := toRecord(ref.Key, r, ok)
		if *confirm {
			forgot, err := insp.Forget(ctx, ref)
			if err != nil {
				return f.failure(addr, fmt.Errorf("forget %s at %s: %w", ref, addr, err))
			}
			rec.Forgotten = &forgot
			if forgot {
				n++
			}
		} else if ok {
			n++
		}
		out.Records = append(out.Records, rec)
	}
	if err := f.emit(e, out, func(w io.Writer) { printRecords(w, out.Records, true) }); err != nil {
		return err
	}
	if !*confirm {
		return usageError{err: fmt.Errorf("dedupe forget: dry run: %d of %d keys have a record to forget; nothing deleted. Run again with --%s to delete them: their next delivery runs the handler again", n, len(refs), reprocessFlag)}
	}
	return nil
}
