package main

import (
	"context"
	"regexp"
	"testing"
)

type tagsOutput struct {
	Tags []segmentTag `json:"tags"`
}

// TestSegment creates, shows and caps segment tags through the built
// binary while an allocator's source reserves segments, on each store.
func TestSegment(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			testSegment(t, b)
		})
	}
}

func testSegment(t *testing.T, b backend) {
	ctx := context.Background()
	storeURL, ns := b.url(t), unique("ns")
	cli := func(args ...string) result {
		t.Helper()
		return idemq(t, nil, append(args[:2:2], append([]string{"--store", storeURL, "--namespace", ns}, args[2:]...)...)...)
	}
	var got tagsOutput
	mustJSON(t, cli("segment", "create", "orders", "--step", "100", "--start", "1000", "--max", "1300", "--description", "order numbers", "--json"), &got)
	if len(got.Tags) != 1 {
		t.Fatalf("create: %+v", got)
	}
	if tg := got.Tags[0]; tg.Tag != "orders" || tg.NextID != 1000 || tg.Step != 100 || tg.Max != 1300 || tg.Description != "order numbers" || tg.Updated == "-" {
		t.Errorf("created %+v", tg)
	}
	if r := cli("segment", "create", "users", "--step", "10"); r.code != 0 {
		t.Fatalf("create users: %v", r)
	}
	wantFail(t, cli("segment", "create", "orders", "--step", "5"), exitFailure, `create tag "orders"`, "exists")

	// An allocator's source takes the three segments below the maximum.
	f := newSegmentFlags("test", "", "")
	if err := f.Parse([]string{"--store", storeURL, "--namespace", ns}); err != nil {
		t.Fatal(err)
	}
	src, _, closeSrc, err := f.open(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	defer closeSrc()
	for range 3 {
		if _, err := src.NextSegment(ctx, "orders", 0); err != nil {
			t.Fatal(err)
		}
	}
	mustJSON(t, cli("segment", "show", "orders", "--json"), &got)
	if len(got.Tags) != 1 || got.Tags[0].NextID != 1300 {
		t.Errorf("show after three segments: %+v, want next ID 1300", got)
	}
	mustJSON(t, cli("segment", "show", "--json"), &got)
	if len(got.Tags) != 2 || got.Tags[0].Tag != "orders" || got.Tags[1].Tag != "users" || got.Tags[1].NextID != 1 {
		t.Errorf("show every tag: %+v", got)
	}
	r := cli("segment", "show")
	if r.code != 0 || !regexp.MustCompile(`(?m)^users +1 +10 +none `).MatchString(r.stdout) {
		t.Errorf("table:\n%v", r)
	}

	wantFail(t, cli("segment", "set-max", "orders", "1200"), exitUsage, "set the maximum", "handed out already")
	mustJSON(t, cli("segment", "set-max", "orders", "2000", "--json"), &got)
	if got.Tags[0].Max != 2000 {
		t.Errorf("set-max 2000: %+v", got)
	}
	mustJSON(t, cli("segment", "set-max", "orders", "0", "--json"), &got)
	if got.Tags[0].Max != 0 {
		t.Errorf("set-max 0: %+v", got)
	}
	if _, err := src.NextSegment(ctx, "orders", 5000); err != nil {
		t.Errorf("a segment past the removed maximum: %v", err)
	}

	wantFail(t, cli("segment", "show", "nope"), exitFailure, "segment: unknown tag", "idemq segment create")
	wantFail(t, cli("segment", "set-max", "nope", "5"), exitFailure, "segment: unknown tag")
}
