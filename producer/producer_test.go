package producer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/producer"
)

// message is a msgkey.Message held in maps, as a client's message would be.
type message struct {
	props map[string]string
	keys  []string
}

func newMessage() *message                        { return &message{props: map[string]string{}} }
func (m *message) GetProperty(name string) string { return m.props[name] }
func (m *message) SetProperty(name, value string) { m.props[name] = value }
func (m *message) Keys() []string                 { return m.keys }
func (m *message) SetKeys(keys []string)          { m.keys = keys }

// seqKeys issues "k1", "k2", ... or fails when err is set.
type seqKeys struct {
	n   int
	err error
}

func (s *seqKeys) NextKey(context.Context) (string, error) {
	if s.err != nil {
		return "", s.err
	}
	s.n++
	return fmt.Sprintf("k%d", s.n), nil
}

// TestStamper: a message is stamped once and keeps its key on every
// resend; a key the caller set is kept; an invalid key or a failing source
// leaves the message unchanged.
func TestStamper(t *testing.T) {
	s, err := producer.NewStamper(&seqKeys{})
	if err != nil {
		t.Fatal(err)
	}
	m := newMessage()
	for range 3 {
		if key, err := s.Stamp(context.Background(), m); key != "k1" || err != nil {
			t.Fatalf("Stamp = %q, %v; want k1", key, err)
		}
	}
	if msgkey.Of(m) != "k1" || !slices.Equal(m.keys, []string{"k1"}) {
		t.Errorf("key %q, Keys %q; want k1 in both", msgkey.Of(m), m.keys)
	}

	business := newMessage()
	business.props[msgkey.Property] = "order-42"
	business.keys = []string{"customer-7"}
	if key, err := s.Stamp(context.Background(), business); key != "order-42" || err != nil ||
		!slices.Equal(business.keys, []string{"customer-7", "order-42"}) {
		t.Errorf("Stamp = %q, %v, Keys %q; want the caller's key kept and added", key, err, business.keys)
	}

	bad := newMessage()
	bad.props[msgkey.Property] = strings.Repeat("k", msgkey.MaxLen+1)
	if _, err := s.Stamp(context.Background(), bad); !errors.Is(err, msgkey.ErrInvalid) || len(bad.keys) != 0 {
		t.Errorf("invalid key: %v, Keys %q; want ErrInvalid and no Keys", err, bad.keys)
	}

	boom := errors.New("clock moved backwards")
	failing, err := producer.NewStamper(&seqKeys{err: boom})
	if err != nil {
		t.Fatal(err)
	}
	fresh := newMessage()
	if _, err := failing.Stamp(context.Background(), fresh); !errors.Is(err, boom) || msgkey.Of(fresh) != "" {
		t.Errorf("failing source: %v, key %q; want its error and no key", err, msgkey.Of(fresh))
	}

	if _, err := producer.NewStamper(nil); err == nil {
		t.Error("NewStamper(nil) succeeded")
	}
}
