package memdedupe_test

import (
	"context"
	"fmt"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
)

// An operator lists a group's records page by page, then forgets one that a
// bad deploy completed wrongly, so that its next delivery runs again.
func ExampleStore_List() {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	store := memdedupe.New(memdedupe.Config{Now: func() time.Time { return now }})
	ctx := context.Background()
	var (
		reqs []dedupe.Item
		done []dedupe.Ticket
	)
	for _, key := range []string{"order-1001", "order-1002", "order-1003", "refund-7"} {
		reqs = append(reqs, dedupe.Item{Ref: dedupe.Ref{Group: "billing", Key: key}})
	}
	res, _, _ := store.Claim(ctx, reqs, time.Minute)
	for i, r := range res {
		if reqs[i].Key != "order-1003" {
			done = append(done, dedupe.Ticket{Ref: reqs[i].Ref, Token: r.Token})
		}
	}
	_, _ = store.Complete(ctx, done, time.Hour)

	req := dedupe.ListRequest{Group: "billing", Prefix: "order-", Limit: 2}
	for {
		page, next, err := store.List(ctx, req)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, rec := range page {
			fmt.Println(rec.Ref.Key, rec.Done, rec.Expires.Format(time.TimeOnly))
		}
		if next == "" {
			break
		}
		req.Cursor = next
	}

	forgotten, _ := store.Forget(ctx, dedupe.Ref{Group: "billing", Key: "order-1002"})
	st, _ := store.Stats(ctx, "", "billing")
	fmt.Println(forgotten, st.Processing, st.Done)
	// Output:
	// order-1001 true 13:00:00
	// order-1002 true 13:00:00
	// order-1003 false 12:01:00
	// true 1 2
}
