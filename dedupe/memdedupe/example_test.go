package memdedupe_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/internal/testkit"
)

// A consumer claims a message and dies; once its lease has run out another
// consumer takes the message over, and the first one can no longer complete
// it. The clock is injected to step past the lease.
func Example() {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	store := memdedupe.New(memdedupe.Config{Now: func() time.Time { return now }})
	ctx := context.Background()
	req := dedupe.ClaimRequest{Ref: dedupe.Ref{Group: "billing", Key: "order-1003"}, Lease: 30 * time.Second}

	first, _ := testkit.Claim(ctx, store, req)
	second, _ := testkit.Claim(ctx, store, req)
	fmt.Println(first.Outcome, second.Outcome, second.Remaining)

	now = now.Add(time.Minute)
	third, _ := testkit.Claim(ctx, store, req)
	fmt.Println(third.Outcome)

	err := testkit.Complete(ctx, store, dedupe.Ticket{Ref: req.Ref, Token: first.Token}, time.Hour)
	fmt.Println(errors.Is(err, dedupe.ErrLeaseLost))

	err = testkit.Complete(ctx, store, dedupe.Ticket{Ref: req.Ref, Token: third.Token}, time.Hour)
	again, _ := testkit.Claim(ctx, store, req)
	fmt.Println(err, again.Outcome, again.Remaining)
	// Output:
	// acquired in-flight 30s
	// acquired
	// true
	// <nil> done 1h0m0s
}
