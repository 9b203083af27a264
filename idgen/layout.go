package idgen

import (
	"fmt"
	"math"
	"math/bits"
	"time"
)

// A Layout says how an ID's 63 usable bits are split. From the most
// significant bit down an ID holds
//
//	time | datacenter | worker | generation | sequence
//
// or, when NodeLast is set (Sonyflake's order),
//
//	time | generation | sequence | datacenter | worker
//
// The sign bit is always 0. Datacenter and worker together form the node id;
// a layout that does not split its node sets DatacenterBits to 0. Generation
// bits count clock rollbacks (see [BumpGeneration]).
//
// Layout is a plain value: copy a preset and change fields to derive one.
type Layout struct {
	// Name appears in errors and reports.
	Name string
	// TimeBits is the width of the time field: units since Epoch.
	TimeBits int
	// DatacenterBits and WorkerBits are the widths of the two halves of
	// the node id.
	DatacenterBits, WorkerBits int
	// GenerationBits is the width of the clock-rollback generation, at
	// most 8.
	GenerationBits int
	// SequenceBits is the width of the per-tick counter; 2^SequenceBits
	// IDs per node and tick.
	SequenceBits int
	// NodeLast puts the node bits lowest, below the sequence.
	NodeLast bool
	// Unit is the length of one tick, from 1ms to 1s.
	Unit time.Duration
	// Epoch is the instant of tick 0. It must be set.
	Epoch time.Time
}

// Presets. Each gives the widths and epoch of the system it is named after;
// `idemq id layouts` prints their limits. Layouts that end within ten years
// (or already have) need [Config].AllowShortLife; exhausted ones are
// refused.
var (
	// Twitter is the original snowflake: 41 bits of milliseconds since
	// Twitter's epoch (2010-11-04T01:42:54.657Z), 5 datacenter bits, 5
	// worker bits, 12 sequence bits: 4,096,000 IDs per second per node
	// until 2080. It is the default layout.
	Twitter = Layout{
		Name: "twitter", TimeBits: 41, DatacenterBits: 5, WorkerBits: 5, SequenceBits: 12,
		Unit: time.Millisecond, Epoch: time.UnixMilli(1288834974657).UTC(),
	}
	// RollbackBits counts clock rollbacks in its IDs: 41 bits of
	// milliseconds since 2020-01-31T16:00:00Z (1580486400000), 3 machine
	// bits, 5 process bits, 2 clock-rollback generation bits and 12
	// sequence bits.
	RollbackBits = Layout{
		Name: "rollback-bits", TimeBits: 41, DatacenterBits: 3, WorkerBits: 5, GenerationBits: 2, SequenceBits: 12,
		Unit: time.Millisecond, Epoch: time.UnixMilli(1580486400000).UTC(),
	}
	// UIDGenerator is Baidu uid-generator's default: 28 bits of seconds
	// since 2016-05-20, 22 worker bits, 13 sequence bits. It ran out on
	// 2024-11-20: its time field overflowed into the sign bit and the IDs
	// of deployments that kept it turned negative. It is kept to decode
	// old IDs and is refused by New.
	UIDGenerator = Layout{
		Name: "uid-generator", TimeBits: 28, WorkerBits: 22, SequenceBits: 13,
		Unit: time.Second, Epoch: time.Date(2016, 5, 20, 0, 0, 0, 0, time.UTC),
	}
	// Sonyflake is sony/sonyflake's layout and bit order: 39 bits of 10ms
	// units since 2014-09-01, then 8 sequence bits, then 16 machine bits
	// (25,600 IDs per second per machine, until 2188). Sonyflake v2 counts
	// from 2025-01-01 unless told otherwise: copy the layout and set Epoch
	// to decode its IDs.
	Sonyflake = Layout{
		Name: "sonyflake", TimeBits: 39, WorkerBits: 16, SequenceBits: 8, NodeLast: true,
		Unit: 10 * time.Millisecond, Epoch: time.Date(2014, 9, 1, 0, 0, 0, 0, time.UTC),
	}
	// JSSafe fits 53 bits, so every ID is exact as a JavaScript number: 37
	// bits of 10ms units since 2025-01-01 (until 2068), 6 node bits, 10
	// sequence bits (102,400 IDs per second per node).
	JSSafe = Layout{
		Name: "js-safe", TimeBits: 37, WorkerBits: 6, SequenceBits: 10,
		Unit: 10 * time.Millisecond, Epoch: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
	}
)

const (
	// maxGenerationBits bounds the per-generation bookkeeping of
	// BumpGeneration.
	maxGenerationBits = 8
	// maxLife keeps tick*Unit within a time.Duration.
	maxLife = time.Duration(math.MaxInt64)
	// year is the Julian year used in life checks and reports.
	year = 36525 * 24 * time.Hour / 100
)

// validate reports whether the layout is well formed: widths not negative,
// at most 63 bits in all, a time field of at least one bit, at most 8
// generation bits, a unit from 1ms to 1s, an epoch between 1970 and 2200,
// and a lifetime (2^TimeBits units) within 292 years. Errors wrap
// [ErrInvalidConfig].
func (l Layout) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: layout %q: %s", ErrInvalidConfig, l.Name, fmt.Sprintf(format, args...))
	}
	for _, f := range []struct {
		name string
		bits int
	}{
		{"time", l.TimeBits}, {"datacenter", l.DatacenterBits}, {"worker", l.WorkerBits},
		{"generation", l.GenerationBits}, {"sequence", l.SequenceBits},
	} {
		if f.bits < 0 {
			return bad("negative %s bits", f.name)
		}
	}
	switch {
	case l.TimeBits == 0:
		return bad("no time bits")
	case l.totalBits() > 63:
		return bad("%d bits do not fit in 63", l.totalBits())
	case l.GenerationBits > maxGenerationBits:
		return bad("%d generation bits (at most %d)", l.GenerationBits, maxGenerationBits)
	case l.Unit < time.Millisecond || l.Unit > time.Second:
		return bad("unit %v outside 1ms..1s", l.Unit)
	case l.Epoch.IsZero():
		return bad("no epoch")
	case l.Epoch.Year() < 1970 || l.Epoch.Year() >= 2200:
		return bad("epoch %v outside 1970..2200", l.Epoch)
	case l.TimeBits >= 63 || int64(1)<<l.TimeBits > int64(maxLife/l.Unit):
		return bad("2^%d units of %v exceed 292 years", l.TimeBits, l.Unit)
	}
	return nil
}

// totalBits is the number of bits an ID uses, at most 63 for a valid layout.
func (l Layout) totalBits() int {
	return l.TimeBits + l.nodeBits() + l.GenerationBits + l.SequenceBits
}

// nodeBits is the width of the node id: datacenter and worker bits.
func (l Layout) nodeBits() int { return l.DatacenterBits + l.WorkerBits }

// MaxNode is the largest node id the layout holds.
func (l Layout) MaxNode() int64 { return 1<<l.nodeBits() - 1 }

// endOfLife is the first instant the time field cannot hold: Epoch plus
// 2^TimeBits units.
func (l Layout) endOfLife() time.Time {
	return l.Epoch.Add(time.Duration(int64(1)<<l.TimeBits) * l.Unit)
}

// NodeOf composes a node id from its datacenter and worker halves. Errors
// wrap [ErrInvalidConfig].
func (l Layout) NodeOf(datacenter, worker int64) (int64, error) {
	if datacenter < 0 || datacenter > 1<<l.DatacenterBits-1 {
		return 0, fmt.Errorf("%w: layout %q: datacenter %d outside 0..%d", ErrInvalidConfig, l.Name, datacenter, 1<<l.DatacenterBits-1)
	}
	if worker < 0 || worker > 1<<l.WorkerBits-1 {
		return 0, fmt.Errorf("%w: layout %q: worker %d outside 0..%d", ErrInvalidConfig, l.Name, worker, 1<<l.WorkerBits-1)
	}
	return datacenter<<l.WorkerBits | worker, nil
}

// splitNode is the inverse of NodeOf.
func (l Layout) splitNode(node int64) (datacenter, worker int64) {
	return node >> l.WorkerBits & (1<<l.DatacenterBits - 1), node & (1<<l.WorkerBits - 1)
}

// checkNode reports a node id the layout cannot hold.
func (l Layout) checkNode(node int64) error {
	if node < 0 || node > l.MaxNode() {
		return fmt.Errorf("%w: layout %q: node %d outside 0..%d", ErrInvalidConfig, l.Name, node, l.MaxNode())
	}
	return nil
}

// Parts are the fields of a decoded ID.
type Parts struct {
	// Time is the start of the ID's tick.
	Time time.Time
	// Tick is the time field: units since the epoch.
	Tick int64
	// Node is the whole node field; Datacenter and Worker are its halves.
	Node, Datacenter, Worker int64
	Generation               int64
	Sequence                 int64
}

// Decode splits id into its fields. It uses no state but the layout, so IDs
// of any node and layout decode side by side.
func (l Layout) Decode(id ID) Parts {
	p := l.plan()
	v := int64(id)
	node := v & p.nodeMask >> p.nodeShift
	dc, w := l.splitNode(node)
	tick := int64(uint64(v) >> p.timeShift) // the sign bit of a foreign ID reads as time
	return Parts{
		Time:       l.Epoch.Add(time.Duration(tick) * l.Unit).UTC(),
		Tick:       tick,
		Node:       node,
		Datacenter: dc,
		Worker:     w,
		Generation: v & p.genMask >> p.genShift,
		Sequence:   v & p.seqMask >> p.seqShift,
	}
}

// Compose builds the ID of the given fields, for tests and tools; t is
// rounded down to its tick. Errors wrap [ErrInvalidConfig] or [ErrRange].
func (l Layout) Compose(t time.Time, node, generation, sequence int64) (ID, error) {
	if err := l.validate(); err != nil {
		return 0, err
	}
	if err := l.checkNode(node); err != nil {
		return 0, err
	}
	if t.Before(l.Epoch) || !t.Before(l.endOfLife()) {
		return 0, fmt.Errorf("%w: layout %q: time %v outside %v..%v", ErrRange, l.Name, t, l.Epoch, l.endOfLife())
	}
	if generation < 0 || generation >= 1<<l.GenerationBits {
		return 0, fmt.Errorf("%w: layout %q: generation %d outside 0..%d", ErrRange, l.Name, generation, 1<<l.GenerationBits-1)
	}
	if sequence < 0 || sequence >= 1<<l.SequenceBits {
		return 0, fmt.Errorf("%w: layout %q: sequence %d outside 0..%d", ErrRange, l.Name, sequence, 1<<l.SequenceBits-1)
	}
	p := l.plan()
	tick := int64(t.Sub(l.Epoch) / l.Unit)
	return ID(tick<<p.timeShift | node<<p.nodeShift | generation<<p.genShift | sequence<<p.seqShift), nil
}

// plan is a valid layout compiled into the shifts and masks the generator
// uses on every call.
type plan struct {
	timeShift, nodeShift, genShift, seqShift uint
	nodeMask, genMask, seqMask               int64 // in place
	keepMask                                 int64 // node and generation
	seqOne                                   int64 // 1 in the sequence field
	seqMax                                   int64 // largest sequence number
	maxTick                                  int64
	epochNanos, unitNanos                    int64
	// tick = hi64((nanos-epoch) * magic) >> magicShift, a division by the
	// unit without a divide instruction.
	magic      uint64
	magicShift uint
}

func (l Layout) plan() plan {
	var p plan
	s, g, n := uint(l.SequenceBits), uint(l.GenerationBits), uint(l.nodeBits())
	if l.NodeLast {
		p.nodeShift, p.seqShift, p.genShift = 0, n, n+s
	} else {
		p.seqShift, p.genShift, p.nodeShift = 0, s, s+g
	}
	p.timeShift = s + g + n
	p.nodeMask = (1<<n - 1) << p.nodeShift
	p.genMask = (1<<g - 1) << p.genShift
	p.seqMask = (1<<s - 1) << p.seqShift
	p.keepMask = p.nodeMask | p.genMask
	p.seqOne = 1 << p.seqShift
	p.seqMax = 1<<s - 1
	p.maxTick = 1<<l.TimeBits - 1
	p.epochNanos = l.Epoch.UnixNano()
	p.unitNanos = int64(l.Unit)
	p.magic, p.magicShift = divMagic(uint64(l.Unit))
	return p
}

// divMagic returns m and s with n/u == hi64(n*m) >> s for every n < 2^63
// (Granlund and Montgomery, "Division by invariant integers using
// multiplication", theorem 4.2, with N = 63). u must be at least 4.
func divMagic(u uint64) (m uint64, s uint) {
	l := uint(bits.Len64(u - 1)) // ceil(log2 u)
	// m = ceil(2^(63+l) / u); 2^(l-1) < u keeps the quotient in 64 bits.
	q, r := bits.Div64(1<<(l-1), 0, u)
	if r != 0 {
		q++
	}
	return q, l - 1
}

// tickOf converts nanoseconds since the Unix epoch to ticks since the
// layout's epoch; an instant before the epoch gives beforeEpoch.
func (p *plan) tickOf(nanos int64) int64 {
	d := nanos - p.epochNanos
	if d < 0 {
		return beforeEpoch
	}
	hi, _ := bits.Mul64(uint64(d), p.magic)
	return int64(hi >> (p.magicShift & 63))
}

// beforeEpoch is the tick of instants before the epoch: far enough behind
// any real tick that every policy treats it as a step back, and recognisable.
const beforeEpoch = math.MinInt64 / 2

// nanosOf is the first instant of tick.
func (p *plan) nanosOf(tick int64) int64 { return p.epochNanos + tick*p.unitNanos }
