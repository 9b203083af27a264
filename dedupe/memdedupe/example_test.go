package memdedupe_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
)

// A consumer claims a message and dies; once its lease has run out another
// consumer takes the message over, and the first one can no longer complete
// it. The clock is injected to step past the lease.
func Example() {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	store := memdedupe.New(memdedupe.Config{Now: func() time.Time { return now }})
	ctx := context.Background()
	// A single message is a batch of one.
	const lease = 30 * time.Second
	reqs := []dedupe.Item{{Ref: dedupe.Ref{Group: "billing", Key: "order-1003"}}}
	ref := reqs[0].Ref

	first, _, _ := store.Claim(ctx, reqs, lease)
	second, _, _ := store.Claim(ctx, reqs, lease)
	fmt.Println(first[0].Outcome, second[0].Outcome, second[0].Remaining)

	now = now.Add(time.Minute)
	third, _, _ := store.Claim(ctx, reqs, lease)
	fmt.Println(third[0].Outcome)

	errs, _ := store.Complete(ctx, []dedupe.Ticket{{Ref: ref, Token: first[0].Token}}, time.Hour)
	fmt.Println(errors.Is(errs[0], dedupe.ErrLeaseLost))

	errs, _ = store.Complete(ctx, []dedupe.Ticket{{Ref: ref, Token: third[0].Token}}, time.Hour)
	again, _, _ := store.Claim(ctx, reqs, lease)
	fmt.Println(errs[0], again[0].Outcome, again[0].Remaining)
	// Output:
	// acquired busy 30s
	// acquired
	// true
	// <nil> suppressed 1h0m0s
}
