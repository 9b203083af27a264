package msgkey_test

import (
	"context"
	"errors"
	"testing"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/msgkey"
)

// fixedIDs answers id, or fails with err.
type fixedIDs struct {
	id  int64
	err error
}

func (g fixedIDs) Next(context.Context) (int64, error) { return g.id, g.err }

// unsignedIDs answers id.
type unsignedIDs uint64

func (g unsignedIDs) Next(context.Context) (uint64, error) { return uint64(g), nil }

// TestFromIDs: a key is its ID in decimal and passes Validate; a generator
// that fails gives no key and its own error.
func TestFromIDs(t *testing.T) {
	down := errors.New("generator down")
	tests := []struct {
		name    string
		gen     fixedIDs
		want    string
		wantErr error
	}{
		{name: "Decimal", gen: fixedIDs{id: 7205759403792793600}, want: "7205759403792793600"},
		{name: "Zero", gen: fixedIDs{id: 0}, want: "0"},
		{name: "GeneratorFails", gen: fixedIDs{id: 1, err: down}, wantErr: down},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := msgkey.FromIDs(tt.gen).NextKey(context.Background())
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Fatalf("NextKey = %q, %v; want %q, %v", got, err, tt.want, tt.wantErr)
			}
			if err == nil {
				if err := msgkey.Validate(got); err != nil {
					t.Errorf("key %q: %v", got, err)
				}
			}
		})
	}
}

// TestFromIDsUnsigned: unsigned IDs print in full, past the int64 range.
func TestFromIDsUnsigned(t *testing.T) {
	got, err := msgkey.FromIDs(unsignedIDs(1<<64 - 1)).NextKey(context.Background())
	if err != nil || got != "18446744073709551615" {
		t.Fatalf("NextKey = %q, %v; want 18446744073709551615", got, err)
	}
}

// TestFromIDsGenerator: keys from a real generator, its ID type inferred,
// are distinct.
func TestFromIDsGenerator(t *testing.T) {
	gen, err := idgen.New(1, idgen.Config{})
	if err != nil {
		t.Fatal(err)
	}
	keys := msgkey.FromIDs(gen)
	seen := map[string]bool{}
	for range 1000 {
		k, err := keys.NextKey(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if seen[k] {
			t.Fatalf("key %s issued twice", k)
		}
		seen[k] = true
	}
}
