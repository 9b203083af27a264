package dedupe_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
)

// The broker delivers a message twice; the charge runs once.
func ExampleGuard() {
	guard, err := dedupe.NewGuard(memdedupe.New(memdedupe.Config{}), dedupe.GuardConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ref := dedupe.Ref{Namespace: "shop", Group: "billing", Key: "order-1001"}
	charge := func(context.Context) error {
		fmt.Println("charging order-1001")
		return nil
	}
	for range 2 {
		outcome, err := guard.Do(context.Background(), ref, "", charge)
		fmt.Println(outcome, err)
	}
	// Output:
	// charging order-1001
	// ran <nil>
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
	ref := dedupe.Ref{Group: "billing", Key: "order-1002"}
	attempts := 0
	charge := func(context.Context) error {
		attempts++
		if attempts == 1 {
			return errors.New("payment service unavailable")
		}
		return nil
	}
	for range 3 {
		outcome, err := guard.Do(context.Background(), ref, dedupe.Fingerprint([]byte(`{"amount":42}`)), charge)
		fmt.Println(outcome, err)
	}
	fmt.Println("attempts:", attempts)
	// Output:
	// ran payment service unavailable
	// ran <nil>
	// suppressed <nil>
	// attempts: 2
}
