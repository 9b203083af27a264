// Package bench compares idemq's components with peer libraries in one
// process. Sub-benchmark names are "<group>/<implementation>": rows named
// idemq... are ours, the others are peers, and cmd/benchtable reports each
// of ours as a ratio to each peer of its group.
package bench

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bwmarrin/snowflake"
	"github.com/idemq/idemq/idgen"
	"github.com/sony/sonyflake/v2"
)

// The ID benchmarks run on two layouts: Twitter's, where at full speed the
// 12-bit sequence is the limit (4,096,000 IDs/s, 244.1 ns/op), and a wide
// one with 20 sequence bits, where the cost of issuing an ID is.
var wideLayout = idgen.Layout{
	Name: "wide", TimeBits: 41, WorkerBits: 2, SequenceBits: 20,
	Unit: time.Millisecond, Epoch: idgen.Twitter.Epoch,
}

// fillBatch is the batch size of the fill rows, which take IDs with
// Generator.Fill as a producer sending messages in batches would.
const fillBatch = 64

// sink keeps the IDs alive so that the compiler cannot drop the calls.
var sink atomic.Int64

func BenchmarkTwitter(b *testing.B) {
	b.Run("idemq", func(b *testing.B) { benchIdemq(b, newIdemq(b, idgen.Twitter, 0), false) })
	b.Run("bwmarrin", func(b *testing.B) { benchBwmarrin(b, newBwmarrin(b, 10, 12), false) })
	b.Run("sonyflake", func(b *testing.B) { benchSony(b, newSony(b, 10, 12), false) })
}

func BenchmarkTwitterParallel(b *testing.B) {
	b.Run("idemq", func(b *testing.B) { benchIdemq(b, newIdemq(b, idgen.Twitter, 0), true) })
	b.Run("bwmarrin", func(b *testing.B) { benchBwmarrin(b, newBwmarrin(b, 10, 12), true) })
	b.Run("sonyflake", func(b *testing.B) { benchSony(b, newSony(b, 10, 12), true) })
}

func BenchmarkWide(b *testing.B)         { benchWide(b, false) }
func BenchmarkWideParallel(b *testing.B) { benchWide(b, true) }

func benchWide(b *testing.B, parallel bool) {
	b.Run("idemq", func(b *testing.B) { benchIdemq(b, newIdemq(b, wideLayout, 0), parallel) })
	b.Run("idemq-coarse", func(b *testing.B) { benchIdemq(b, newIdemq(b, wideLayout, time.Millisecond), parallel) })
	b.Run("idemq-fill64", func(b *testing.B) { benchFill(b, newIdemq(b, wideLayout, 0), parallel) })
	b.Run("idemq-coarse-fill64", func(b *testing.B) { benchFill(b, newIdemq(b, wideLayout, time.Millisecond), parallel) })
	b.Run("bwmarrin", func(b *testing.B) { benchBwmarrin(b, newBwmarrin(b, 2, 20), parallel) })
	b.Run("sonyflake", func(b *testing.B) { benchSony(b, newSony(b, 2, 20), parallel) })
}

// newIdemq returns a generator of l on node 1, on a coarse clock of that
// resolution if it is not 0.
func newIdemq(b *testing.B, l idgen.Layout, coarse time.Duration) *idgen.Generator {
	g, err := idgen.New(1, idgen.Config{Layout: l, Coarse: coarse})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close() })
	return g
}

// newBwmarrin configures bwmarrin/snowflake through its package variables,
// which only NewNode reads.
func newBwmarrin(b *testing.B, nodeBits, stepBits uint8) *snowflake.Node {
	snowflake.NodeBits, snowflake.StepBits = nodeBits, stepBits
	n, err := snowflake.NewNode(1)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

func newSony(b *testing.B, machineBits, seqBits int) *sonyflake.Sonyflake {
	sf, err := sonyflake.New(sonyflake.Settings{
		BitsMachineID: machineBits, BitsSequence: seqBits, TimeUnit: time.Millisecond,
		StartTime: idgen.Twitter.Epoch, MachineID: func() (int, error) { return 1, nil },
	})
	if err != nil {
		b.Fatal(err)
	}
	return sf
}

// Each bench function writes its loops out for both modes: a call through
// a function value would add a tenth of the cost it measures.

func benchIdemq(b *testing.B, g *idgen.Generator, parallel bool) {
	ctx := context.Background()
	b.ReportAllocs()
	if !parallel {
		var s int64
		for b.Loop() {
			id, err := g.Next(ctx)
			if err != nil {
				b.Fatal(err)
			}
			s += int64(id)
		}
		sink.Add(s)
		return
	}
	b.RunParallel(func(pb *testing.PB) {
		var s int64
		for pb.Next() {
			id, err := g.Next(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			s += int64(id)
		}
		sink.Add(s)
	})
}

func benchFill(b *testing.B, g *idgen.Generator, parallel bool) {
	b.ReportAllocs()
	fill := func(buf []idgen.ID) {
		if _, err := g.Fill(context.Background(), buf); err != nil {
			panic(err)
		}
	}
	if !parallel {
		buf, i := make([]idgen.ID, fillBatch), fillBatch
		var s int64
		for b.Loop() {
			if i == fillBatch {
				fill(buf)
				i = 0
			}
			s += int64(buf[i])
			i++
		}
		sink.Add(s)
		return
	}
	b.RunParallel(func(pb *testing.PB) {
		buf, i := make([]idgen.ID, fillBatch), fillBatch
		var s int64
		for pb.Next() {
			if i == fillBatch {
				fill(buf)
				i = 0
			}
			s += int64(buf[i])
			i++
		}
		sink.Add(s)
	})
}

func benchBwmarrin(b *testing.B, n *snowflake.Node, parallel bool) {
	b.ReportAllocs()
	if !parallel {
		var s int64
		for b.Loop() {
			s += int64(n.Generate())
		}
		sink.Add(s)
		return
	}
	b.RunParallel(func(pb *testing.PB) {
		var s int64
		for pb.Next() {
			s += int64(n.Generate())
		}
		sink.Add(s)
	})
}

func benchSony(b *testing.B, sf *sonyflake.Sonyflake, parallel bool) {
	b.ReportAllocs()
	if !parallel {
		var s int64
		for b.Loop() {
			id, err := sf.NextID()
			if err != nil {
				b.Fatal(err)
			}
			s += id
		}
		sink.Add(s)
		return
	}
	b.RunParallel(func(pb *testing.PB) {
		var s int64
		for pb.Next() {
			id, err := sf.NextID()
			if err != nil {
				b.Error(err)
				return
			}
			s += id
		}
		sink.Add(s)
	})
}
