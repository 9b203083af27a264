package idgen_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
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
			err := l.Validate()
			if (err == nil) != tt.valid || (err != nil && !errors.Is(err, idgen.ErrInvalidConfig)) {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
}

func TestPresets(t *testing.T) {
	tests := []struct {
		layout    idgen.Layout
		bits      int
		perSecond float64
		end       string
		js        string // date IDs pass 2^53, "" for never
	}{
		{idgen.Twitter, 63, 4_096_000, "2080-07-10", "2010-11-28"},
		{idgen.WideWorker, 63, 1_024_000, "2026-09-06", "2017-12-24"},
		{idgen.RollbackBits, 63, 4_096_000, "2089-10-07", "2020-02-25"},
		{idgen.UIDGenerator, 63, 8192, "2024-11-20", "2016-05-23"},
		{idgen.Sonyflake, 63, 25_600, "2188-11-16", "2014-11-02"},
		{idgen.JSSafe, 53, 102_400, "2068-07-21", ""},
	}
	for _, tt := range tests {
		t.Run(tt.layout.Name, func(t *testing.T) {
			l := tt.layout
			if err := l.Validate(); err != nil {
				t.Fatal(err)
			}
			if l.TotalBits() != tt.bits || l.IDsPerSecond() != tt.perSecond || l.EndOfLife().Format(time.DateOnly) != tt.end {
				t.Fatalf("%d bits, %v IDs/s, end %v", l.TotalBits(), l.IDsPerSecond(), l.EndOfLife())
			}
			want := "IDs stay below 2^53"
			if tt.js != "" {
				want = "IDs pass 2^53 (unsafe as JavaScript numbers) from " + tt.js
			}
			if r := l.Report(t0); !strings.Contains(r, want) {
				t.Fatalf("report lacks %q:\n%s", want, r)
			}
		})
	}
	if len(idgen.Presets()) != len(tests) {
		t.Fatalf("%d presets", len(idgen.Presets()))
	}
}

func TestReport(t *testing.T) {
	r := idgen.UIDGenerator.Report(time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC))
	for _, want := range []string{"28 time (1s since 2016-05-20", "22 worker", "13 sequence", "2024-11-20 (exhausted 2.0 years ago)", "8192 IDs/s", "2^53"} {
		if !strings.Contains(r, want) {
			t.Errorf("report lacks %q:\n%s", want, r)
		}
	}
}

func TestDecodeCompose(t *testing.T) {
	for _, l := range idgen.Presets() {
		t.Run(l.Name, func(t *testing.T) {
			maxGen, maxSeq := int64(1)<<l.GenerationBits-1, int64(1)<<l.SequenceBits-1
			for range 1000 {
				at := l.Epoch.Add(time.Duration(rand.Int64N(int64(l.EndOfLife().Sub(l.Epoch)))))
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
			last, err := l.Compose(l.EndOfLife().Add(-l.Unit), l.MaxNode(), maxGen, maxSeq)
			if err != nil || last < 0 || (l.TotalBits() == 63 && last != 1<<63-1) {
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
		{"after end", l.EndOfLife(), 0, 0, 0, idgen.ErrRange},
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
	tw := newGen(t, 1023, idgen.Config{Layout: idgen.Twitter})
	sf := newGen(t, 65535, idgen.Config{Layout: idgen.Sonyflake})
	a, b := next(t, tw), next(t, sf)
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
