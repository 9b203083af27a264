package msgkey_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/idemq/idemq/msgkey"
)

func TestDerive(t *testing.T) {
	a, err := msgkey.Derive("order-42", "billing", "payment")
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := msgkey.Derive("order-42", "billing", "payment"); again != a {
		t.Errorf("Derive is not deterministic: %q, then %q", a, again)
	}
	if !strings.HasPrefix(a, "payment-") || len(a) != len("payment-")+26 || msgkey.Validate(a) != nil {
		t.Errorf("Derive = %q, want payment- and 26 characters, a valid key", a)
	}
	// Each part counts, and no part runs into the next.
	for _, other := range [][3]string{
		{"order-43", "billing", "payment"},
		{"order-42", "shipping", "payment"},
		{"order-42", "billing", "receipt"},
		{"order-4", "2billing", "payment"},
		{"order-42billing", "", "payment"},
	} {
		if k, _ := msgkey.Derive(other[0], other[1], other[2]); k == a {
			t.Errorf("Derive%q = %q, as for (order-42, billing, payment)", other, k)
		}
	}
	// However deep the chain, the key stays within MaxLen.
	k := strings.Repeat("x", msgkey.MaxLen)
	for range 10 {
		if k, err = msgkey.Derive(k, "g", strings.Repeat("n", 64)); err != nil || msgkey.Validate(k) != nil {
			t.Fatalf("a derived key of a derived key = %q, %v", k, err)
		}
	}
}

func TestDeriveRefuses(t *testing.T) {
	for _, name := range []string{"", "two words", "tab\there", strings.Repeat("n", 64+1), "\xff"} {
		if k, err := msgkey.Derive("order-42", "billing", name); !errors.Is(err, msgkey.ErrInvalid) {
			t.Errorf("Derive(name %q) = %q, %v; want an error wrapping ErrInvalid", name, k, err)
		}
	}
}

func FuzzDerive(f *testing.F) {
	f.Add("order-42", "billing", "payment")
	f.Fuzz(func(t *testing.T, parent, group, name string) {
		k, err := msgkey.Derive(parent, group, name)
		if err != nil {
			if !errors.Is(err, msgkey.ErrInvalid) {
				t.Fatalf("Derive error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if verr := msgkey.Validate(k); verr != nil {
			t.Fatalf("Derive(%q, %q, %q) = %q, not a valid key: %v", parent, group, name, k, verr)
		}
	})
}
