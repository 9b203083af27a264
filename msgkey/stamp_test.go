package msgkey_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/idemq/idemq/msgkey"
)

// mapMessage is a msgkey.Message held in a map and a slice.
type mapMessage struct {
	props msgkey.Properties
	keys  []string
}

func (m *mapMessage) GetProperty(name string) string { return m.props.GetProperty(name) }
func (m *mapMessage) SetProperty(name, value string) { m.props[name] = value }
func (m *mapMessage) Keys() []string                 { return m.keys }
func (m *mapMessage) SetKeys(keys []string)          { m.keys = keys }

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
			m := &mapMessage{props: msgkey.Properties{}, keys: slices.Clone(tt.keys)}
			if tt.preset != "" {
				m.props[msgkey.Property] = tt.preset
			}
			calls := 0
			next := func(context.Context) (string, error) { calls++; return tt.next, tt.nextErr }
			key, err := msgkey.Stamp(t.Context(), m, next)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Stamp = %q, %v; want %v", key, err, tt.wantErr)
				}
				if msgkey.Of(m) != tt.preset || !slices.Equal(m.keys, tt.keys) {
					t.Fatalf("a failed Stamp changed the message: key %q Keys %q", msgkey.Of(m), m.keys)
				}
				return
			}
			if err != nil || key != tt.wantKey || msgkey.Of(m) != tt.wantKey || !slices.Equal(m.keys, tt.wantKeys) {
				t.Fatalf("Stamp = %q, %v; key %q Keys %q; want %q Keys %q", key, err, msgkey.Of(m), m.keys, tt.wantKey, tt.wantKeys)
			}
			if tt.preset != "" && calls != 0 {
				t.Fatal("a message with a key asked the source for another")
			}
			again, err := msgkey.Stamp(t.Context(), m, next)
			if err != nil || again != key || !slices.Equal(m.keys, tt.wantKeys) {
				t.Fatalf("second Stamp = %q, %v, Keys %q; want no change", again, err, m.keys)
			}
		})
	}
}

func TestProperties(t *testing.T) {
	props := map[string]string{msgkey.Property: "k1", "other": "x"}
	if got := msgkey.Of(msgkey.Properties(props)); got != "k1" {
		t.Fatalf("Of = %q, want k1", got)
	}
	if got := msgkey.Of(msgkey.Properties(nil)); got != "" {
		t.Fatalf("Of(nil map) = %q, want empty", got)
	}
}
