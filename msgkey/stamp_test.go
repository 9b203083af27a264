package msgkey_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/idemq/idemq/msgkey"
)

func TestStamp(t *testing.T) {
	boom := errors.New("clock moved backwards")
	tests := []struct {
		name     string
		preset   string   // the Property before stamping
		keys     []string // Keys before stamping
		next     string   // what the key source issues
		nextErr  error
		wantKey  string
		wantKeys []string
		wantErr  error
	}{
		{name: "new key", next: "k1", wantKey: "k1", wantKeys: []string{"k1"}},
		{name: "preset kept", preset: "order-42", next: "k1", wantKey: "order-42", wantKeys: []string{"order-42"}},
		{name: "other Keys kept", keys: []string{"customer-7"}, next: "k1", wantKey: "k1", wantKeys: []string{"customer-7", "k1"}},
		{name: "key already in Keys", preset: "order-42", keys: []string{"a", "order-42"}, wantKey: "order-42", wantKeys: []string{"a", "order-42"}},
		{name: "invalid preset", preset: "order 42", next: "k1", wantErr: msgkey.ErrInvalid},
		{name: "invalid new key", next: "a\x01b", wantErr: msgkey.ErrInvalid},
		{name: "source fails", nextErr: boom, wantErr: boom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := msgkey.Properties{}
			if tt.preset != "" {
				m[msgkey.Property] = tt.preset
			}
			keys := slices.Clone(tt.keys)
			calls := 0
			next := func(context.Context) (string, error) { calls++; return tt.next, tt.nextErr }
			key, withKey, err := msgkey.Stamp(t.Context(), m, keys, next)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Stamp = %q, %v; want %v", key, err, tt.wantErr)
				}
				if !slices.Equal(keys, tt.keys) {
					t.Fatalf("a failed Stamp changed the Keys it was given: %q", keys)
				}
				return
			}
			if err != nil || key != tt.wantKey || !slices.Equal(withKey, tt.wantKeys) || !slices.Equal(keys, tt.keys) {
				t.Fatalf("Stamp = %q, %q, %v (Keys given %q); want %q, %q", key, withKey, err, keys, tt.wantKey, tt.wantKeys)
			}
			if tt.preset != "" && calls != 0 {
				t.Fatal("a message with a key asked the source for another")
			}
			m[msgkey.Property] = key
			again, againKeys, err := msgkey.Stamp(t.Context(), m, withKey, next)
			if err != nil || again != key || !slices.Equal(againKeys, tt.wantKeys) {
				t.Fatalf("second Stamp = %q, %q, %v; want no change", again, againKeys, err)
			}
		})
	}
}
