package natsjs_test

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/natsjs"
)

// TestProducer publishes messages with and without a key of their own:
// each carries its key in msgkey.Property and as its message id, and a
// message published again is dropped by the stream's duplicate window.
func TestProducer(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testenv.NATS(t), jetstream.ConsumerConfig{})
	p, err := natsjs.NewProducer(f.js, testkit.Keys(t, 7))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		headers map[string]string
		want    string // "" for a new key
		async   bool
	}{
		{"new key", nil, "", false},
		{"new key, async", nil, "", true},
		{"business key", map[string]string{msgkey.Property: "order-42"}, "order-42", false},
		{"message id", map[string]string{jetstream.MsgIDHeader: "order-43"}, "order-43", false},
		{"key over message id", map[string]string{msgkey.Property: "order-44", jetstream.MsgIDHeader: "other"}, "order-44", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := nats.NewMsg(f.subject)
			msg.Data = []byte(tc.name)
			for k, v := range tc.headers {
				msg.Header.Set(k, v)
			}
			publish := func() *jetstream.PubAck {
				if !tc.async {
					ack, err := p.Publish(t.Context(), msg)
					if err != nil {
						t.Fatal(err)
					}
					return ack
				}
				fut, err := p.PublishAsync(t.Context(), msg)
				if err != nil {
					t.Fatal(err)
				}
				select {
				case ack := <-fut.Ok():
					return ack
				case err := <-fut.Err():
					t.Fatal(err)
				}
				return nil
			}
			first := publish()
			key := msg.Header.Get(msgkey.Property)
			if key == "" || tc.want != "" && key != tc.want {
				t.Fatalf("key %q, want %q (non-empty)", key, tc.want)
			}
			if id := msg.Header.Get(jetstream.MsgIDHeader); id != key {
				t.Errorf("message id %q, want the key %q", id, key)
			}
			again := publish()
			if first.Duplicate || !again.Duplicate || again.Sequence != first.Sequence {
				t.Errorf("published twice: %+v then %+v; want the second a duplicate of the first", first, again)
			}
			if k := msg.Header.Get(msgkey.Property); k != key {
				t.Errorf("key changed on the second publish: %q, then %q", key, k)
			}
		})
	}
	t.Run("invalid key", func(t *testing.T) {
		msg := nats.NewMsg(f.subject)
		msg.Header.Set(msgkey.Property, "has space")
		if _, err := p.Publish(t.Context(), msg); !errors.Is(err, msgkey.ErrInvalid) {
			t.Errorf("publish: %v, want msgkey.ErrInvalid", err)
		}
		if id := msg.Header.Get(jetstream.MsgIDHeader); id != "" {
			t.Errorf("a refused message got the message id %q", id)
		}
	})
	t.Run("key source fails", func(t *testing.T) {
		failing := errors.New("no node id")
		p, err := natsjs.NewProducer(f.js, keySource(func(context.Context) (string, error) { return "", failing }))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Publish(t.Context(), nats.NewMsg(f.subject)); !errors.Is(err, failing) {
			t.Errorf("publish: %v, want the source's error", err)
		}
	})
}

type keySource func(context.Context) (string, error)

func (k keySource) NextKey(ctx context.Context) (string, error) { return k(ctx) }
