package dedupe_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/internal/dedupekit"
)

// The broker delivers a message twice; the charge runs once.
func ExampleGuard() {
	guard, err := dedupe.NewGuard(memdedupe.New(memdedupe.Config{}), dedupe.GuardConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	msg := []dedupe.Item{{Ref: dedupe.Ref{Namespace: "shop", Group: "billing", Key: "order-1001"}}}
	charge := func(context.Context, int) error {
		fmt.Println("charging order-1001")
		return nil
	}
	for range 2 {
		res := guard.Do(context.Background(), msg, charge)
		fmt.Println(res[0].Outcome, res[0].Err)
	}
	// Output:
	// charging order-1001
	// completed <nil>
	// suppressed <nil>
}

// A handler fails: its claim is released, so the redelivery runs at once
// instead of being dropped as a duplicate.
func ExampleGuard_Do() {
	guard, err := dedupe.NewGuard(memdedupe.New(memdedupe.Config{}), dedupe.GuardConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	msg := []dedupe.Item{{
		Ref:         dedupe.Ref{Group: "billing", Key: "order-1002"},
		Fingerprint: dedupekit.Fingerprint([]byte(`{"amount":42}`)),
	}}
	attempts := 0
	charge := func(context.Context, int) error {
		attempts++
		if attempts == 1 {
			return errors.New("payment service unavailable")
		}
		return nil
	}
	for range 3 {
		res := guard.Do(context.Background(), msg, charge)
		fmt.Println(res[0].Outcome, res[0].Err)
	}
	fmt.Println("attempts:", attempts)
	// Output:
	// failed payment service unavailable
	// completed <nil>
	// suppressed <nil>
	// attempts: 2
}
