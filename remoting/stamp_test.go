package remoting_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	rmqproducer "github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/remoting"
)

// seqKeys issues "k1", "k2", ... or fails when err is set.
type seqKeys struct {
	n   atomic.Int64
	err error
}

func (s *seqKeys) NextKey(context.Context) (string, error) {
	if s.err != nil {
		return "", s.err
	}
	return fmt.Sprintf("k%d", s.n.Add(1)), nil
}

func newProducer(t *testing.T, keys msgkey.Source) *remoting.Producer {
	t.Helper()
	// A real client that is never started: Stamp does not touch it, and a
	// send fails before reaching it when stamping fails.
	rp, err := rocketmq.NewProducer(rmqproducer.WithNameServer([]string{"127.0.0.1:1"}),
		rmqproducer.WithInstanceName(t.Name())) // the example's client has the default one
	if err != nil {
		t.Fatal(err)
	}
	p, err := remoting.NewProducer(rp, keys)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestStampOnceAndKeep(t *testing.T) {
	p := newProducer(t, &seqKeys{})
	m := primitive.NewMessage("orders", []byte("x"))
	for range 3 { // a resend stamps again
		if err := p.Stamp(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	if got := msgkey.Of(m); got != "k1" {
		t.Fatalf("key %q, want k1", got)
	}
	if got := m.GetKeys(); got != "k1" {
		t.Fatalf("Keys %q, want k1", got)
	}
}

func TestStampKeepsCallerKeys(t *testing.T) {
	for _, tc := range []struct {
		name              string
		property, keys    string
		wantKey, wantKeys string
	}{
		{"business key", "order-42", "", "order-42", "order-42"},
		{"existing Keys", "", "customer-7", "k1", "customer-7 k1"},
		{"key already in Keys", "order-42", "a order-42", "order-42", "a order-42"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProducer(t, &seqKeys{})
			m := primitive.NewMessage("orders", []byte("x"))
			m.WithProperty(msgkey.Property, tc.property)
			if tc.keys != "" {
				m.WithKeys(strings.Fields(tc.keys))
			}
			if err := p.Stamp(context.Background(), m); err != nil {
				t.Fatal(err)
			}
			if msgkey.Of(m) != tc.wantKey || m.GetKeys() != tc.wantKeys {
				t.Fatalf("key %q Keys %q, want %q %q", msgkey.Of(m), m.GetKeys(), tc.wantKey, tc.wantKeys)
			}
		})
	}
}

func TestStampRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  string
	}{
		{"too long", strings.Repeat("k", msgkey.MaxLen+1)},
		{"space", "order 42"},
		{"property separator", "a\x01b"},
		{"value separator", "a\x02b"},
		{"newline", "a\nb"},
		{"invalid UTF-8", "a\xffb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProducer(t, &seqKeys{})
			m := primitive.NewMessage("orders", []byte("x"))
			m.WithProperty(msgkey.Property, tc.key)
			if err := p.Stamp(context.Background(), m); !errors.Is(err, msgkey.ErrInvalid) {
				t.Fatalf("got %v, want msgkey.ErrInvalid", err)
			}
			if m.GetKeys() != "" {
				t.Fatalf("an invalid key reached Keys: %q", m.GetKeys())
			}
		})
	}
}

func TestStampKeySourceFails(t *testing.T) {
	boom := errors.New("clock moved backwards")
	p := newProducer(t, &seqKeys{err: boom})
	m := primitive.NewMessage("orders", []byte("x"))
	if err := p.Stamp(context.Background(), m); !errors.Is(err, boom) {
		t.Fatalf("got %v, want the key source's error", err)
	}
	if msgkey.Of(m) != "" {
		t.Fatal("a message was stamped although the key source failed")
	}
	if _, err := p.SendSync(context.Background(), m); !errors.Is(err, boom) {
		t.Fatalf("SendSync: %v, want the key source's error before sending", err)
	}
}

func TestStampBadArguments(t *testing.T) {
	p := newProducer(t, &seqKeys{})
	if err := p.Stamp(context.Background()); err == nil {
		t.Fatal("no messages: want an error")
	}
	if err := p.Stamp(context.Background(), nil); err == nil {
		t.Fatal("nil message: want an error")
	}
	if _, err := remoting.NewProducer(nil, &seqKeys{}); err == nil {
		t.Fatal("nil producer: want an error")
	}
}
