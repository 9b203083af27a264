package idgen_test

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/internal/testkit"
)

func TestLayoutValidate(t *testing.T) {
	ok := idgen.Layout{Name: "ok", TimeBits: 41, WorkerBits: 10, SequenceBits: 12, Unit: time.Millisecond, Epoch: t0}
	tests := []struct {
		name   string
		change func(*idgen.Layout)
		valid  bool
	}{
		{"ok", func(l *idgen.Layout) { l.SequenceBits = 10 }, true},
		{"63 bits", func(*idgen.Layout) {}, true},
		{"64 bits", func(l *idgen.Layout) { l.SequenceBits = 13 }, false},
		{"no time", func(l *idgen.Layout) { l.TimeBits = 0 }, false},
		{"negative bits", func(l *idgen.Layout) { l.WorkerBits = -1 }, false},
		{"9 generation bits", func(l *idgen.Layout) { l.GenerationBits, l.WorkerBits = 9, 1 }, false},
		{"8 generation bits", func(l *idgen.Layout) { l.GenerationBits, l.WorkerBits = 8, 2 }, true},
		{"no sequence", func(l *idgen.Layout) { l.SequenceBits = 0 }, true},
		{"unit under 1ms", func(l *idgen.Layout) { l.Unit = time.Millisecond - 1 }, false},
		{"unit over 1s", func(l *idgen.Layout) { l.Unit = time.Second + 1 }, false},
		{"odd unit", func(l *idgen.Layout) { l.Unit = 1500 * time.Microsecond }, true},
		{"no epoch", func(l *idgen.Layout) { l.Epoch = time.Time{} }, false},
		{"epoch before 1970", func(l *idgen.Layout) { l.Epoch = time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC) }, false},
		{"over 292 years", func(l *idgen.Layout) { l.TimeBits, l.SequenceBits = 44, 9 }, false},
		{"time bits 63", func(l *idgen.Layout) { l.TimeBits, l.WorkerBits, l.SequenceBits = 63, 0, 0 }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := ok
			tt.change(&l)
			err := idgen.ValidateLayout(l)
			if (err == nil) != tt.valid || (err != nil && !errors.Is(err, idgen.ErrInvalidConfig)) {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
}

// presets are the preset layouts.
var presets = []idgen.Layout{idgen.Twitter, idgen.RollbackBits, idgen.UIDGenerator, idgen.Sonyflake, idgen.JSSafe}

func TestPresets(t *testing.T) {
	tests := []struct {
		layout idgen.Layout
		bits   int
		end    string
	}{
		{idgen.Twitter, 63, "2080-07-10"},
		{idgen.RollbackBits, 63, "2089-10-07"},
		{idgen.UIDGenerator, 63, "2024-11-20"},
		{idgen.Sonyflake, 63, "2188-11-16"},
		{idgen.JSSafe, 53, "2068-07-21"},
	}
	for _, tt := range tests {
		t.Run(tt.layout.Name, func(t *testing.T) {
			l := tt.layout
			if err := idgen.ValidateLayout(l); err != nil {
				t.Fatal(err)
			}
			if idgen.TotalBits(l) != tt.bits || idgen.EndOfLife(l).Format(time.DateOnly) != tt.end {
				t.Fatalf("%d bits, end %v", idgen.TotalBits(l), idgen.EndOfLife(l))
			}
		})
	}
}

func TestDecodeCompose(t *testing.T) {
	for _, l := range presets {
		t.Run(l.Name, func(t *testing.T) {
			maxGen, maxSeq := int64(1)<<l.GenerationBits-1, int64(1)<<l.SequenceBits-1
			for range 1000 {
				at := l.Epoch.Add(time.Duration(rand.Int64N(int64(idgen.EndOfLife(l).Sub(l.Epoch)))))
				node, gen, seq := rand.Int64N(l.MaxNode()+1), rand.Int64N(maxGen+1), rand.Int64N(maxSeq+1)
				id, err := l.Compose(at, node, gen, seq)
				if err != nil {
					t.Fatal(err)
				}
				p := l.Decode(id)
				dc, w := node>>l.WorkerBits, node&(1<<l.WorkerBits-1)
				if !p.Time.Equal(l.Epoch.Add(at.Sub(l.Epoch).Truncate(l.Unit))) || p.Node != node || p.Datacenter != dc ||
					p.Worker != w || p.Generation != gen || p.Sequence != seq || id < 0 {
					t.Fatalf("Compose(%v, %d, %d, %d) = %d decodes to %+v", at, node, gen, seq, id, p)
				}
			}
			last, err := l.Compose(idgen.EndOfLife(l).Add(-l.Unit), l.MaxNode(), maxGen, maxSeq)
			if err != nil || last < 0 || (idgen.TotalBits(l) == 63 && last != 1<<63-1) {
				t.Fatalf("last ID of the layout: %d, %v", last, err)
			}
		})
	}
}

func TestComposeErrors(t *testing.T) {
	l := idgen.RollbackBits
	tests := []struct {
		name           string
		at             time.Time
		node, gen, seq int64
		want           error
	}{
		{"before epoch", l.Epoch.Add(-time.Millisecond), 0, 0, 0, idgen.ErrRange},
		{"after end", idgen.EndOfLife(l), 0, 0, 0, idgen.ErrRange},
		{"node", t0, 256, 0, 0, idgen.ErrInvalidConfig},
		{"generation", t0, 0, 4, 0, idgen.ErrRange},
		{"sequence", t0, 0, 0, 4096, idgen.ErrRange},
		{"negative sequence", t0, 0, 0, -1, idgen.ErrRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := l.Compose(tt.at, tt.node, tt.gen, tt.seq); !errors.Is(err, tt.want) {
				t.Fatalf("Compose: %v, want %v", err, tt.want)
			}
		})
	}
	if _, err := (idgen.Layout{}).Compose(t0, 0, 0, 0); !errors.Is(err, idgen.ErrInvalidConfig) {
		t.Fatalf("Compose with an invalid layout: %v", err)
	}
}

// Decoding needs no shared state: IDs of different layouts decode side by
// side (bwmarrin/snowflake decodes through package variables).
func TestDecodeIsPerLayout(t *testing.T) {
	tw := testkit.Generator(t, 1023, idgen.Config{Layout: idgen.Twitter})
	sf := testkit.Generator(t, 65535, idgen.Config{Layout: idgen.Sonyflake})
	a, b := testkit.Next(t, tw), testkit.Next(t, sf)
	if pa, pb := tw.Config().Layout.Decode(a), sf.Config().Layout.Decode(b); pa.Node != 1023 || pb.Node != 65535 || pa.Datacenter != 31 || pa.Worker != 31 {
		t.Fatalf("decoded %+v and %+v", pa, pb)
	}
}

func TestNodeOf(t *testing.T) {
	l := idgen.RollbackBits // 3 datacenter bits, 5 worker bits
	if n, err := l.NodeOf(7, 31); err != nil || n != 255 {
		t.Fatalf("NodeOf(7, 31) = %d, %v", n, err)
	}
	id, err := l.Compose(t0, 7<<5|3, 0, 0)
	if p := l.Decode(id); err != nil || p.Datacenter != 7 || p.Worker != 3 {
		t.Fatalf("Decode of node 7:3: %+v, %v", p, err)
	}
	for _, c := range [][2]int64{{8, 0}, {0, 32}, {-1, 0}, {0, -1}} {
		if _, err := l.NodeOf(c[0], c[1]); !errors.Is(err, idgen.ErrInvalidConfig) {
			t.Errorf("NodeOf(%d, %d): %v", c[0], c[1], err)
		}
	}
}
