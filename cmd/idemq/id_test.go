package main

import (
	"strings"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
)

type newOutput struct {
	Layout string   `json:"layout"`
	Node   int64    `json:"node"`
	Format string   `json:"format"`
	IDs    []string `json:"ids"`
}

type decodeOutput struct {
	Layout string    `json:"layout"`
	IDs    []decoded `json:"ids"`
}

// TestIDNewDecode issues IDs through the built binary in every text form
// and decodes them again: the node is the one asked for, the time now, and
// the IDs increase.
func TestIDNewDecode(t *testing.T) {
	tests := []struct {
		layout, node, format string
		wantNode             int64
		dc, worker           int64 // for layouts with datacenter bits
	}{
		{"twitter", "1:5", "dec", 37, 1, 5},
		{"twitter", "1023", "base32", 1023, 31, 31},
		{"rollback-bits", "7:31", "base62", 255, 7, 31},
		{"sonyflake", "65535", "dec", 65535, 0, 0},
		{"js-safe", "0", "base62", 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.layout+"/"+tt.format, func(t *testing.T) {
			before := time.Now()
			var got newOutput
			mustJSON(t, idemq(t, nil, "id", "new", "--layout", tt.layout, "--node", tt.node, "--count", "50", "--format", tt.format, "--json"), &got)
			if got.Layout != tt.layout || got.Node != tt.wantNode || got.Format != tt.format || len(got.IDs) != 50 {
				t.Fatalf("got %+v", got)
			}
			var dec decodeOutput
			args := append([]string{"id", "decode", "--layout", tt.layout, "--json"}, got.IDs...)
			mustJSON(t, idemq(t, nil, args...), &dec)
			if len(dec.IDs) != 50 {
				t.Fatalf("decoded %d IDs, want 50", len(dec.IDs))
			}
			l, _ := layoutByName(newFlags("", "", ""), tt.layout)
			var last idgen.ID = -1
			for i, d := range dec.IDs {
				if d.Input != got.IDs[i] || d.Node != tt.wantNode {
					t.Errorf("decoded %+v, want input %s node %d", d, got.IDs[i], tt.wantNode)
				}
				if d.ID <= last {
					t.Errorf("ID %d (%s) not above the one before, %d", d.ID, d.Input, last)
				}
				last = d.ID
				if formatID(d.ID, tt.format) != d.Input {
					t.Errorf("ID %d in %s is %s, decoded from %s", d.ID, tt.format, formatID(d.ID, tt.format), d.Input)
				}
				ts, err := time.Parse(timeFormat, d.Time)
				if err != nil {
					t.Fatal(err)
				}
				if ts.Before(before.Add(-l.Unit)) || ts.After(time.Now()) {
					t.Errorf("time %s, want between %s and now", d.Time, before)
				}
				if l.DatacenterBits > 0 {
					if d.Datacenter == nil || *d.Datacenter != tt.dc || *d.Worker != tt.worker {
						t.Errorf("datacenter/worker %v/%v, want %d/%d", d.Datacenter, d.Worker, tt.dc, tt.worker)
					}
				} else if d.Datacenter != nil || d.Worker != nil {
					t.Errorf("layout %s has no datacenter, got %v/%v", tt.layout, d.Datacenter, d.Worker)
				}
			}
		})
	}
}

// TestIDNewRunsInOrder runs the command twice on one node, as a script
// would: the second run's IDs all lie above the first's.
func TestIDNewRunsInOrder(t *testing.T) {
	var first, second newOutput
	mustJSON(t, idemq(t, nil, "id", "new", "--node", "9", "--count", "1000", "--json"), &first)
	mustJSON(t, idemq(t, nil, "id", "new", "--node", "9", "--count", "1000", "--json"), &second)
	a, _ := idgen.Parse(first.IDs[len(first.IDs)-1])
	b, _ := idgen.Parse(second.IDs[0])
	if b <= a {
		t.Fatalf("second run starts at %d, not above the first run's last %d", b, a)
	}
}

// TestIDDecodeFields decodes IDs composed from known fields, in every text
// form and from standard input.
func TestIDDecodeFields(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 30, 45, 123e6, time.UTC)
	l := idgen.RollbackBits
	node, _ := l.NodeOf(6, 17)
	id, err := l.Compose(at, node, 3, 4095)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{id.String(), toBase32(id), strings.ToLower(toBase32(id)), toBase62(id)} {
		var dec decodeOutput
		mustJSON(t, inProcess(t, "", "id", "decode", "--layout", "rollback-bits", "--json", in), &dec)
		d := dec.IDs[0]
		if d.ID != id || d.Time != "2026-03-01T12:30:45.123Z" || d.Node != node || *d.Datacenter != 6 || *d.Worker != 17 || d.Generation != 3 || d.Sequence != 4095 {
			t.Errorf("decode %s: got %+v", in, d)
		}
	}
	r := inProcess(t, id.String()+"\n "+toBase62(id)+"\n", "id", "decode", "--layout", "rollback-bits")
	if r.code != 0 || strings.Count(r.stdout, "2026-03-01T12:30:45.123Z") != 2 || !strings.HasPrefix(r.stdout, "ID ") {
		t.Errorf("decode from stdin, as a table:\n%v", r)
	}
	// An ID of digits only is decimal unless --format says otherwise.
	small := idgen.ID(12345)
	var dec decodeOutput
	mustJSON(t, inProcess(t, "", "id", "decode", "--format", "base62", "--json", toBase62(small)), &dec)
	if dec.IDs[0].ID != small {
		t.Errorf("--format base62 %s decoded as %d, want %d", toBase62(small), dec.IDs[0].ID, small)
	}
}

func TestIDLayouts(t *testing.T) {
	var got []layoutInfo
	mustJSON(t, idemq(t, nil, "id", "layouts", "--json"), &got)
	if len(got) != len(presets) {
		t.Fatalf("%d layouts, want %d", len(got), len(presets))
	}
	byName := map[string]layoutInfo{}
	for _, l := range got {
		byName[l.Name] = l
	}
	tw := byName["twitter"]
	if tw.TimeBits != 41 || tw.DatacenterBits != 5 || tw.WorkerBits != 5 || tw.SequenceBits != 12 || tw.Unit != "1ms" ||
		tw.Epoch != "2010-11-04T01:42:54.657Z" || tw.EndOfLife != "2080-07-10T17:30:30.209Z" || tw.LifeYears != 69.6 || tw.Exhausted || tw.Nodes != 1024 {
		t.Errorf("twitter: %+v", tw)
	}
	if uid := byName["uid-generator"]; !uid.Exhausted || uid.EndOfLife != "2024-11-20T21:24:16.000Z" || uid.Unit != "1s" {
		t.Errorf("uid-generator: %+v", uid)
	}
	r := idemq(t, nil, "id", "layouts")
	if r.code != 0 || !strings.Contains(r.stdout, "sonyflake      39/0/16/0/8") || !strings.Contains(r.stdout, "(exhausted)") {
		t.Errorf("table:\n%v", r)
	}
}
