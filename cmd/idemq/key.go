package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/dedupekit"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/outbox"
)

const keyDoc = `Report what is known of one message key, to answer "what happened to it?":
the outbox rows that hold it (--outbox), its dedupe record in each consumer
group named by --group (in --store), and the copies of it the brokers hold,
found through their Keys index (--namesrv) in the topics of those outbox rows,
in each --topic, and in each group's retry and dead-letter topics. Give at
least one of --outbox, --group and --namesrv.

Groups are named, not discovered: a dedupe store files its records by group
first (the SQL primary key, the Redis hash tag), so finding a key in every
group would read every record. The outbox has no index on the key: the
database reads the whole table. A broker answers at most 64 copies a topic
(its maxMsgsNumBatch), from what its commit log still holds.

A part whose store or server fails shows its error and the rest still
prints; the command then exits 1, as it does when the key is found nowhere.`

// keyReport is what 'idemq key' prints: one section per place asked.
type keyReport struct {
	Key    string     `json:"key"`
	Outbox *keyOutbox `json:"outbox,omitempty"`
	Dedupe *keyDedupe `json:"dedupe,omitempty"`
	Broker *keyBroker `json:"broker,omitempty"`
}

type keyOutbox struct {
	Store string      `json:"store"`
	Table string      `json:"table"`
	Rows  []outboxRow `json:"rows"`
	Error string      `json:"error,omitempty"`
}

type keyDedupe struct {
	Store     string     `json:"store"`
	Namespace string     `json:"namespace"`
	Groups    []keyGroup `json:"groups"`
	Error     string     `json:"error,omitempty"`
}

// keyGroup is the key's record in one group.
type keyGroup struct {
	Group string `json:"group"`
	record
	Error string `json:"error,omitempty"`
}

// stringsFlag is a flag given once per value.
type stringsFlag []string

func (s *stringsFlag) String() string     { return strings.Join(*s, ",") }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }

func keyCmd(ctx context.Context, e *env, args []string) error {
	f := dedupeStoreFlags(newFlags("idemq key", "[--outbox URL] [--store URL --group G...] [--namesrv ADDR [--topic T...]] [flags] KEY", keyDoc))
	f.Lookup("store").Usage = "dedupe " + storeUsage
	f.Lookup("table").Usage = "SQL `table` of the dedupe records"
	var groups, topics stringsFlag
	f.Var(&groups, "group", "consumer `group` whose dedupe record of the key to show; repeat the flag for each group")
	outboxURL := f.String("outbox", "", "`URL` of the SQL database of the outbox table, in the forms --store takes")
	outboxTable := f.String("outbox-table", outbox.DefaultTable, "SQL `table` of the outbox")
	namesrv := f.String("namesrv", "", "RocketMQ name server `address` (host:port) through which to ask the brokers for their copies")
	f.Var(&topics, "topic", "`topic` to look for copies in, besides the outbox rows' topics; repeat the flag for each topic")
	rest, err := f.flags.parse(e, args) // not dedupeFlags', which wants one --group
	if err != nil {
		return err
	}
	switch {
	case len(rest) == 0:
		return f.usageErr("missing KEY: give the message key to report on")
	case len(rest) > 1:
		return f.usageErr("one key at a time, got %d: %q", len(rest), rest)
	}
	key := rest[0]
	if err := msgkey.Validate(key); err != nil {
		return f.usageErr("%v", err)
	}
	if *outboxURL == "" && len(groups) == 0 && *namesrv == "" {
		return f.usageErr("nothing to look in: give --outbox URL (outbox rows), --group G with --store URL (dedupe records) or --namesrv ADDR (the brokers' copies)")
	}
	for _, g := range groups {
		if err := dedupekit.CheckRef(*f.namespace, g, key); err != nil {
			return f.usageErr("--group %q: %v", g, err)
		}
	}
	if len(topics) > 0 && *namesrv == "" {
		return f.usageErr("--topic needs --namesrv ADDR: it names where the brokers' copies are looked for")
	}
	if *namesrv != "" && len(topics) == 0 && *outboxURL == "" && len(groups) == 0 {
		return f.usageErr("--namesrv needs topics to look in: --topic T, --outbox URL (its rows' topics) or --group G (its retry and dead-letter topics)")
	}
	var outboxAddr, dedupeAddr *storeAddr
	if *outboxURL != "" {
		if outboxAddr, err = resolveStoreFlag(*outboxURL, "outbox"); err != nil {
			return err
		}
		if !outboxAddr.IsSQL() {
			return f.usageErr("--outbox %s is a Redis store: an outbox is a table in the service's SQL database", outboxAddr)
		}
	}
	if len(groups) > 0 {
		if dedupeAddr, err = resolveStore(*f.store); err != nil {
			return err
		}
	} else if *f.store != "" {
		return f.usageErr("--store names the dedupe store, which only --group reads: name the groups whose records to show")
	}

	ctx, cancel := f.context(ctx)
	defer cancel()
	rep := keyReport{Key: key}
	if outboxAddr != nil {
		rep.Outbox = findOutbox(ctx, f.flags, outboxAddr, *outboxTable, key)
	}
	if dedupeAddr != nil {
		rep.Dedupe = findRecords(ctx, f, dedupeAddr, groups, key)
	}
	if *namesrv != "" {
		var search []brokerTopic
		for _, t := range topics {
			search = append(search, brokerTopic{t, "--topic"})
		}
		if rep.Outbox != nil {
			for _, r := range rep.Outbox.Rows {
				search = append(search, brokerTopic{r.Topic, "outbox row"})
			}
		}
		for _, g := range groups {
			search = append(search, brokerTopic{"%RETRY%" + g, "retries of group " + g}, brokerTopic{"%DLQ%" + g, "dead letters of group " + g})
		}
		rep.Broker = findCopies(ctx, *namesrv, search, key)
	}
	if err := f.emit(e, rep, func(w io.Writer) { printKeyReport(w, &rep) }); err != nil {
		return err
	}
	return rep.verdict()
}

// findOutbox reads the rows of the outbox table at addr that hold key.
func findOutbox(ctx context.Context, f *flags, addr *storeAddr, table, key string) *keyOutbox {
	out := &keyOutbox{Store: addr.String(), Table: table, Rows: []outboxRow{}}
	o, closeFn, err := openOutboxAt(ctx, f, addr, table)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	defer closeFn()
	rows, err := o.Find(ctx, key)
	if err != nil {
		out.Error = missingTable(fmt.Errorf("find key at %s: %w", addr, err), outboxTables, table).Error()
		return out
	}
	for _, r := range rows {
		out.Rows = append(out.Rows, outboxRow{r.ID, string(r.State), r.Key, r.Topic, r.OrderingKey, r.Attempts, r.LastError, r.Age.Seconds()})
	}
	return out
}

// findRecords reads the record of key in each of groups from the dedupe
// store at addr.
func findRecords(ctx context.Context, f *dedupeFlags, addr *storeAddr, groups []string, key string) *keyDedupe {
	out := &keyDedupe{Store: addr.String(), Namespace: *f.namespace, Groups: []keyGroup{}}
	insp, _, closeFn, err := f.open(ctx)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	defer closeFn()
	seen := map[string]bool{}
	for _, g := range groups {
		if seen[g] {
			continue
		}
		seen[g] = true
		ref := dedupe.Ref{Namespace: *f.namespace, Group: g, Key: key}
		r, ok, err := insp.Get(ctx, ref)
		kg := keyGroup{Group: g, record: toRecord(key, r, ok)}
		if err != nil {
			kg.record = record{Key: key}
			kg.Error = f.failure(addr, fmt.Errorf("get %s at %s: %w", ref, addr, err)).Error()
		}
		out.Groups = append(out.Groups, kg)
	}
	return out
}

// verdict returns the command's error: the parts that failed, or that the
// key was found nowhere.
func (r *keyReport) verdict() error {
	var failed []string
	found := false
	if o := r.Outbox; o != nil {
		if o.Error != "" {
			failed = append(failed, "outbox: "+o.Error)
		}
		found = found || len(o.Rows) > 0
	}
	if d := r.Dedupe; d != nil {
		if d.Error != "" {
			failed = append(failed, "dedupe: "+d.Error)
		}
		for _, g := range d.Groups {
			if g.Error != "" {
				failed = append(failed, fmt.Sprintf("dedupe group %q: %s", g.Group, g.Error))
			}
			found = found || g.State != "" && g.State != stateNone
		}
	}
	if b := r.Broker; b != nil {
		if b.Error != "" {
			failed = append(failed, "broker: "+b.Error)
		}
		for _, t := range b.Topics {
			if t.Error != "" {
				failed = append(failed, fmt.Sprintf("broker topic %s: %s", t.Topic, t.Error))
			}
			found = found || len(t.Copies) > 0
		}
	}
	switch {
	case len(failed) > 0:
		return errors.New(strings.Join(failed, "\n"))
	case !found:
		return fmt.Errorf("key %q found nowhere: no outbox row, live dedupe record or broker copy among those asked", r.Key)
	}
	return nil
}

// printKeyReport writes r as tables, one per part.
func printKeyReport(w io.Writer, r *keyReport) {
	fmt.Fprintf(w, "KEY %s\n", r.Key)
	if o := r.Outbox; o != nil {
		fmt.Fprintf(w, "\nOUTBOX ROWS (%s, table %s)\n", o.Store, o.Table)
		if o.Error != "" {
			fmt.Fprintf(w, "error: %s\n", o.Error)
		} else if len(o.Rows) == 0 {
			fmt.Fprintln(w, "none")
		} else {
			fmt.Fprintln(w, "ID\tSTATE\tTOPIC\tORDERING KEY\tATTEMPTS\tAGE\tLAST ERROR")
			for _, row := range o.Rows {
				age := time.Duration(row.AgeSec * float64(time.Second)).Round(time.Millisecond)
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%v\t%s\n", row.ID, row.State, row.Topic, dash(row.OrderingKey), row.Attempts, age, dash(row.LastError))
			}
		}
	}
	if d := r.Dedupe; d != nil {
		fmt.Fprintf(w, "\nDEDUPE RECORDS (%s, namespace %q)\n", d.Store, d.Namespace)
		if d.Error != "" {
			fmt.Fprintf(w, "error: %s\n", d.Error)
		} else {
			fmt.Fprintln(w, "GROUP\tSTATE\tEXPIRES\tUPDATED\tFINGERPRINT\tAPPLIED BY")
			for _, g := range d.Groups {
				if g.Error != "" {
					fmt.Fprintf(w, "%s\terror: %s\n", g.Group, g.Error)
					continue
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", g.Group, g.State, dash(g.Expires), dash(g.Updated), dash(g.Fingerprint), dash(g.Trace))
			}
		}
	}
	if b := r.Broker; b != nil {
		printCopies(w, b)
	}
}
