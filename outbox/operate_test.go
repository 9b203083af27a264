package outbox_test

import (
	"testing"

	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/outbox"
)

// TestParkListRetry parks rows by hand, lists them, finds one by its key,
// retries one and ships it, then retries the rest.
func TestParkListRetry(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e env) {
		ctx := t.Context()
		keys := testkit.AddCommitted(t, e.db, e.o, orderedMessages(3, 1)...)
		if n, err := e.o.Park(ctx, "held for audit"); err != nil || n != 3 {
			t.Fatalf("Park: %d, %v", n, err)
		}
		parked, err := e.o.List(ctx, outbox.Parked, 0, 10)
		if err != nil || len(parked) != 3 {
			t.Fatalf("List parked: %+v, %v", parked, err)
		}
		for i, r := range parked {
			if r.Key != keys[i] || r.State != outbox.Parked || r.LastError != "held for audit" || r.Topic != "orders" || r.OrderingKey != "key0" || r.Age < 0 {
				t.Errorf("parked row %d: %+v", i, r)
			}
		}
		if found, err := e.o.Find(ctx, keys[1]); err != nil || len(found) != 1 || found[0].ID != parked[1].ID || found[0].State != outbox.Parked || found[0].LastError != "held for audit" {
			t.Fatalf("Find(%q): %+v, %v; want %+v", keys[1], found, err, parked[1])
		}
		if found, err := e.o.Find(ctx, "no-such-key"); err != nil || len(found) != 0 {
			t.Fatalf("Find of a key no row holds: %+v, %v", found, err)
		}
		if page, err := e.o.List(ctx, outbox.Parked, parked[0].ID, 1); err != nil || len(page) != 1 || page[0].ID != parked[1].ID {
			t.Fatalf("List after the first: %+v, %v", page, err)
		}
		if n, err := e.o.Retry(ctx, parked[0].ID); err != nil || n != 1 {
			t.Fatalf("Retry one: %d, %v", n, err)
		}
		rec := new(recorder)
		r := newRelay(t, e.o, rec, outbox.RelayConfig{})
		waitStats(t, e.o, "the retried row sent", func(s outbox.Counts) bool { return s.Sent == 1 })
		if n, err := e.o.Retry(ctx); err != nil || n != 2 {
			t.Fatalf("Retry the rest: %d, %v", n, err)
		}
		waitStats(t, e.o, "all sent", func(s outbox.Counts) bool { return s.Sent == 3 && s.Parked == 0 })
		r.Close()
		checkOrder(t, rec.sent(), 3, 1)
		if sent, err := e.o.List(ctx, outbox.Sent, 0, 10); err != nil || len(sent) != 3 {
			t.Fatalf("List sent: %+v, %v", sent, err)
		}
	})
}
