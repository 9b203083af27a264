package main

import (
	"encoding/json"
	"fmt"
	"syscall"
	"testing"

	"github.com/idemq/idemq/idgen"
)

// TestServeKilled: two `idemq serve` processes share a tag; one is killed
// with SIGKILL halfway and started again. No ID is ever issued twice, every
// ID lies in what the store reserved, and the IDs lost are the segments the
// killed process held (gaps, never duplicates), counted.
func TestServeKilled(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			store := b.url(t)
			tag := unique("killed")
			const start, step = 5000, 50
			if r := inProcess(t, "", "segment", "create", tag, "--step", fmt.Sprint(step), "--start", fmt.Sprint(start), "--store", store); r.code != 0 {
				t.Fatalf("segment create: %v", r)
			}
			a := startServe(t, "--store", store)
			other := startServe(t, "--store", store)
			seen := map[idgen.ID]bool{}
			doubled := 0
			take := func(s *server, count int) {
				t.Helper()
				status, body := s.get(fmt.Sprintf("/api/segment/batch/%s?count=%d", tag, count))
				var got struct{ IDs []idgen.ID }
				if err := json.Unmarshal([]byte(body), &got); status != 200 || err != nil || len(got.IDs) != count {
					t.Fatalf("batch of %d = %d %s (%v)", count, status, body, err)
				}
				for _, id := range got.IDs {
					if seen[id] {
						doubled++
					}
					seen[id] = true
				}
			}
			for i := range 20 {
				take(a, 7+i)
				take(other, 11+i)
			}
			if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			a.cmd.Wait()
			a = startServe(t, "--store", store)
			for i := range 20 {
				take(a, 7+i)
				take(other, 11+i)
			}
			a.stop()
			other.stop()

			var tags tagsOutput
			mustJSON(t, inProcess(t, "", "segment", "show", tag, "--store", store, "--json"), &tags)
			reserved := tags.Tags[0].NextID - start
			for id := range seen {
				if id < start || int64(id) >= tags.Tags[0].NextID {
					t.Errorf("ID %d outside the %d reserved from %d", id, reserved, start)
				}
			}
			issued := int64(len(seen))
			t.Logf("%s: %d IDs issued, %d doubled, %d reserved, %d lost (the segments the killed process and the stopped ones held)", b.name, issued, doubled, reserved, reserved-issued)
			if doubled != 0 {
				t.Errorf("%d IDs issued twice", doubled)
			}
		})
	}
}
