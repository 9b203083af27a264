package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/idemq/idemq/idgen"
)

func idCmd(ctx context.Context, e *env, args []string) error {
	return dispatch(ctx, e, "idemq id", "Generate, decode and describe snowflake IDs.", []subcommand{
		{"new", "issue IDs from a node you name (--node) or lease (--lease-store)", idNew},
		{"decode", "split IDs into time, node, generation and sequence", idDecode},
		{"layouts", "list the preset layouts with their bits, epoch and end of life", idLayouts},
	}, args)
}

// layoutFlag registers --layout.
func layoutFlag(f *flags) *string {
	names := make([]string, 0, len(presets))
	for _, l := range presets {
		names = append(names, l.Name)
	}
	return f.String("layout", idgen.Twitter.Name, "bit `layout`: "+strings.Join(names, ", "))
}

// layoutByName returns the preset named name.
func layoutByName(f *flags, name string) (idgen.Layout, error) {
	var names []string
	for _, l := range presets {
		if l.Name == name {
			return l, nil
		}
		names = append(names, l.Name)
	}
	return idgen.Layout{}, f.usageErr("unknown layout %q: want one of %s (see 'idemq id layouts')", name, strings.Join(names, ", "))
}

// Text forms of IDs.
const (
	formatAuto    = "auto"
	formatDecimal = "dec"
	formatBase32  = "base32"
	formatBase62  = "base62"
)

func formatID(id idgen.ID, format string) string {
	switch format {
	case formatBase32:
		return toBase32(id)
	case formatBase62:
		return toBase62(id)
	}
	return id.String()
}

// parseNode reads a node id, whole ("37") or, for a layout with datacenter
// bits, datacenter and worker ("1:5").
func parseNode(l idgen.Layout, s string) (int64, error) {
	if dc, w, ok := strings.Cut(s, ":"); ok {
		d, err1 := strconv.ParseInt(dc, 10, 64)
		wk, err2 := strconv.ParseInt(w, 10, 64)
		if err1 != nil || err2 != nil {
			return 0, fmt.Errorf("--node %q: want a node id or datacenter:worker", s)
		}
		if l.DatacenterBits == 0 {
			return 0, fmt.Errorf("--node %q: layout %s has no datacenter bits: give the node id alone", s, l.Name)
		}
		return l.NodeOf(d, wk)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("--node %q: want a node id or datacenter:worker", s)
	}
	if n < 0 || n > l.MaxNode() {
		return 0, fmt.Errorf("--node %d: layout %s holds nodes 0 to %d", n, l.Name, l.MaxNode())
	}
	return n, nil
}

const idNewDoc = `Issue IDs. Every generator running at the same time needs its own node id:
two generators with one node issue the same IDs, and consumers then drop one
message of each pair as a duplicate. So there is no default node. Either name
one with --node (unique among all generators running at the same time), or
lease one from a worker-id pool with --lease-store URL --pool P (with --node
too, the node is registered in the pool so that nobody else holds it).

With a static --node the command waits, before it exits, for the clock to pass
the tick of its last ID, so that the next run on the same node cannot repeat it.
A leased node keeps its high-water mark in the pool instead.

A leased node is waited for, up to --timeout, when none is free. A Redis pool
used for the first time grants nothing for one lease, as after Redis lost its
records (see idgen/redisidgen); an SQL pool's table is created if missing.`

func idNew(ctx context.Context, e *env, args []string) error {
	f := newFlags("idemq id new", "(--node N | --lease-store URL --pool P) [flags]", idNewDoc)
	layoutName := layoutFlag(f)
	node := f.String("node", "", "node `id` (or datacenter:worker), unique among running generators; required without --lease-store")
	count := f.Int("count", 1, "how many IDs, 1 to 1000000")
	format := f.String("format", formatDecimal, "text `form`: dec, base32 or base62")
	leaseStore := f.String("lease-store", "", "lease the node from the worker-id pool in this store `URL` (see --store of 'idemq workers list')")
	pool := f.String("pool", "", "worker-id `pool` name, with --lease-store")
	poolSize := f.Int64("pool-size", 0, "node ids in a new pool (default the layout's node count, at most 65536 on SQL); an existing Redis pool keeps its own")
	lease := f.Duration("lease", 0, "lease length of a new pool (default 10s); an existing Redis pool keeps its own")
	namespace := f.String("namespace", "idemq", "Redis key namespace of the pool")
	table := f.String("table", workerLeaseTable, "SQL table of the pool")
	rest, err := f.parse(e, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return f.usageErr("unexpected arguments %q", rest)
	}
	l, err := layoutByName(f, *layoutName)
	if err != nil {
		return err
	}
	switch *format {
	case formatDecimal, formatBase32, formatBase62:
	default:
		return f.usageErr("--format %q: want dec, base32 or base62", *format)
	}
	if *count < 1 || *count > 1_000_000 {
		return f.usageErr("--count %d: want 1 to 1000000", *count)
	}
	var nodeID int64 = -1
	if *node != "" {
		if nodeID, err = parseNode(l, *node); err != nil {
			return f.usageErr("%v", err)
		}
	}
	if *leaseStore == "" {
		if *pool != "" {
			return f.usageErr("--pool needs --lease-store URL")
		}
		if nodeID < 0 {
			return f.usageErr("--node is required: give a node id (0 to %d for layout %s) that is unique among all generators running at the same time, or lease one with --lease-store URL --pool P", l.MaxNode(), l.Name)
		}
	} else if *pool == "" {
		return f.usageErr("--lease-store needs --pool: the name of the worker-id pool")
	}

	ctx, cancel := f.context(ctx)
	defer cancel()
	var gen *idgen.Generator
	if *leaseStore == "" {
		if gen, err = idgen.New(nodeID, idgen.Config{Layout: l}); err != nil {
			return f.usageErr("%v", err)
		}
	} else {
		var lc idgen.LeaseConfig
		if nodeID >= 0 {
			lc.Static, lc.Node = true, nodeID
		}
		pc := poolConfig{pool: *pool, namespace: *namespace, table: *table, size: *poolSize, lease: *lease}
		var closeLeaser func()
		if gen, closeLeaser, err = leaseGenerator(ctx, l, *leaseStore, pc, lc, *f.timeout); err != nil {
			return err
		}
		// Runs after gen.Close below, which releases the node.
		defer closeLeaser()
	}
	ids := make([]idgen.ID, *count)
	n, err := gen.Fill(ctx, ids)
	closeErr := gen.Close()
	if err != nil {
		return fmt.Errorf("issue IDs: %w (issued %d of %d)", err, n, *count)
	}
	if closeErr != nil {
		return fmt.Errorf("release the node: %w", closeErr)
	}
	if *leaseStore == "" {
		// The next run on this node must start in a later tick.
		next := l.Decode(ids[n-1]).Time.Add(l.Unit)
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
	}
	out := struct {
		Layout string   `json:"layout"`
		Node   int64    `json:"node"`
		Format string   `json:"format"`
		IDs    []string `json:"ids"`
	}{l.Name, gen.Node(), *format, make([]string, n)}
	for i, id := range ids[:n] {
		out.IDs[i] = formatID(id, *format)
	}
	return f.emit(e, out, func(w io.Writer) {
		for _, s := range out.IDs {
			fmt.Fprintln(w, s)
		}
	})
}

// parseIDText reads one ID in format, or in the form its text shows under
// formatAuto: all digits is decimal, else 13 characters base-32 and 11
// base-62.
func parseIDText(s, format string) (idgen.ID, error) {
	switch format {
	case formatDecimal:
		return idgen.Parse(s)
	case formatBase32:
		return parseBase32(s)
	case formatBase62:
		return parseBase62(s)
	}
	if strings.Trim(s, "0123456789") == "" {
		return idgen.Parse(s)
	}
	// The compact forms are fixed-width: their length tells them apart.
	switch len(s) {
	case base32Len:
		return parseBase32(s)
	case base62Len:
		return parseBase62(s)
	}
	return 0, fmt.Errorf("%q is no ID: want decimal digits, %d base-32 or %d base-62 characters", s, base32Len, base62Len)
}

// decoded is one ID's fields, as id decode prints them.
type decoded struct {
	Input      string   `json:"input"`
	ID         idgen.ID `json:"id"`
	Time       string   `json:"time"`
	Tick       int64    `json:"tick"`
	Node       int64    `json:"node"`
	Datacenter *int64   `json:"datacenter,omitempty"`
	Worker     *int64   `json:"worker,omitempty"`
	Generation int64    `json:"generation"`
	Sequence   int64    `json:"sequence"`
}

const idDecodeDoc = `Split IDs into their fields by a layout: the time (UTC, RFC 3339 with
milliseconds), the node (datacenter and worker when the layout splits it), the
clock-rollback generation and the sequence. IDs may be decimal, base-32 (13
characters) or base-62 (11 characters); with no ID arguments they are read
from standard input, separated by white space. An ID of digits only is read as
decimal unless --format says otherwise.`

func idDecode(ctx context.Context, e *env, args []string) error {
	f := newFlags("idemq id decode", "[flags] ID...", idDecodeDoc)
	layoutName := layoutFlag(f)
	format := f.String("format", formatAuto, "text `form` of the IDs: auto, dec, base32 or base62")
	texts, err := f.parse(e, args)
	if err != nil {
		return err
	}
	l, err := layoutByName(f, *layoutName)
	if err != nil {
		return err
	}
	switch *format {
	case formatAuto, formatDecimal, formatBase32, formatBase62:
	default:
		return f.usageErr("--format %q: want auto, dec, base32 or base62", *format)
	}
	if len(texts) == 0 {
		sc := bufio.NewScanner(e.stdin)
		sc.Split(bufio.ScanWords)
		for sc.Scan() {
			texts = append(texts, sc.Text())
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("read IDs from standard input: %w", err)
		}
		if len(texts) == 0 {
			return f.usageErr("no IDs: give them as arguments or on standard input")
		}
	}
	out := struct {
		Layout string    `json:"layout"`
		IDs    []decoded `json:"ids"`
	}{Layout: l.Name}
	for _, s := range texts {
		id, err := parseIDText(s, *format)
		if err != nil {
			return f.usageErr("%v", err)
		}
		if bits := totalBits(l); bits < 63 && id>>bits != 0 {
			return f.usageErr("ID %s does not fit layout %s: its IDs have %d bits; pick the layout that made it (--layout)", s, l.Name, bits)
		}
		p := l.Decode(id)
		d := decoded{Input: s, ID: id, Time: fmtTime(p.Time), Tick: p.Tick, Node: p.Node, Generation: p.Generation, Sequence: p.Sequence}
		if l.DatacenterBits > 0 {
			d.Datacenter, d.Worker = &p.Datacenter, &p.Worker
		}
		out.IDs = append(out.IDs, d)
	}
	return f.emit(e, out, func(w io.Writer) {
		split := l.DatacenterBits > 0
		fmt.Fprint(w, "ID\tTIME\tNODE\t")
		if split {
			fmt.Fprint(w, "DATACENTER\tWORKER\t")
		}
		fmt.Fprintln(w, "GENERATION\tSEQUENCE")
		for _, d := range out.IDs {
			fmt.Fprintf(w, "%s\t%s\t%d\t", d.Input, d.Time, d.Node)
			if split {
				fmt.Fprintf(w, "%d\t%d\t", *d.Datacenter, *d.Worker)
			}
			fmt.Fprintf(w, "%d\t%d\n", d.Generation, d.Sequence)
		}
	})
}

// layoutInfo is one layout, as id layouts prints it.
type layoutInfo struct {
	Name           string  `json:"name"`
	TimeBits       int     `json:"time_bits"`
	DatacenterBits int     `json:"datacenter_bits"`
	WorkerBits     int     `json:"worker_bits"`
	GenerationBits int     `json:"generation_bits"`
	SequenceBits   int     `json:"sequence_bits"`
	NodeLast       bool    `json:"node_last"`
	Unit           string  `json:"unit"`
	Epoch          string  `json:"epoch"`
	LifeYears      float64 `json:"life_years"`
	EndOfLife      string  `json:"end_of_life"`
	Exhausted      bool    `json:"exhausted"`
	Nodes          int64   `json:"nodes"`
	IDsPerSecond   float64 `json:"ids_per_second_per_node"`
}

// years is d in years of 365.2425 days.
func years(d time.Duration) float64 { return d.Hours() / 24 / 365.2425 }

const idLayoutsDoc = `List the preset layouts: field widths in bits (time/datacenter/worker/
generation/sequence), time unit, epoch, lifetime and the end of life, the first
instant the time field cannot hold. 'id new' refuses an exhausted layout;
'id decode' still reads its IDs.`

func idLayouts(ctx context.Context, e *env, args []string) error {
	f := newFlags("idemq id layouts", "[flags]", idLayoutsDoc)
	rest, err := f.parse(e, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return f.usageErr("unexpected arguments %q", rest)
	}
	now := time.Now()
	var out []layoutInfo
	for _, l := range presets {
		out = append(out, layoutInfo{
			Name: l.Name, TimeBits: l.TimeBits, DatacenterBits: l.DatacenterBits, WorkerBits: l.WorkerBits,
			GenerationBits: l.GenerationBits, SequenceBits: l.SequenceBits, NodeLast: l.NodeLast,
			Unit: l.Unit.String(), Epoch: fmtTime(l.Epoch), LifeYears: float64(int(years(endOfLife(l).Sub(l.Epoch))*10)) / 10,
			EndOfLife: fmtTime(endOfLife(l)), Exhausted: !now.Before(endOfLife(l)),
			Nodes: l.MaxNode() + 1, IDsPerSecond: idsPerSecond(l),
		})
	}
	return f.emit(e, out, func(w io.Writer) {
		fmt.Fprintln(w, "NAME\tBITS t/dc/w/g/s\tUNIT\tEPOCH\tLIFE\tEND OF LIFE\tNODES\tIDS/S PER NODE")
		for _, l := range out {
			end := l.EndOfLife
			if l.Exhausted {
				end += " (exhausted)"
			}
			fmt.Fprintf(w, "%s\t%d/%d/%d/%d/%d\t%s\t%s\t%.1f years\t%s\t%d\t%.0f\n", l.Name,
				l.TimeBits, l.DatacenterBits, l.WorkerBits, l.GenerationBits, l.SequenceBits,
				l.Unit, l.Epoch, l.LifeYears, end, l.Nodes, l.IDsPerSecond)
		}
	})
}
