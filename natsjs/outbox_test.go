package natsjs_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/natsjs"
	"github.com/idemq/idemq/outbox"
)

// TestOutboxSender ships rows: each is stored with its key as its message
// id, a row sent again is dropped by the duplicate window, and what the
// server refuses for good wraps outbox.ErrRefused, while an error no
// resend is sure to cure does not.
func TestOutboxSender(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testenv.NATS(t), jetstream.ConsumerConfig{})
	small := "idemq.small." + f.stream
	if _, err := f.js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "small_" + f.stream, Subjects: []string{small}, MaxMsgSize: 64}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.js.DeleteStream(t.Context(), "small_"+f.stream) })
	s, err := natsjs.NewOutboxSender(f.js)
	if err != nil {
		t.Fatal(err)
	}
	row := func(subject, key string, body []byte) *outbox.Message {
		return &outbox.Message{Topic: subject, Body: body, Properties: map[string]string{msgkey.Property: key, "tenant": "acme"}}
	}
	for _, tc := range []struct {
		name    string
		m       *outbox.Message
		refused bool
	}{
		{"no stream for the subject", row("idemq.nowhere."+f.stream, "k-nowhere", []byte("x")), true},
		{"over the stream's max message size", row(small, "k-big", bytes.Repeat([]byte("x"), 100)), true},
		{"over the server's max payload", row(f.subject, "k-huge", make([]byte, 2<<20)), true},
		{"invalid subject", row("idemq. bad", "k-bad", []byte("x")), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Send(t.Context(), tc.m)
			if err == nil || errors.Is(err, outbox.ErrRefused) != tc.refused {
				t.Errorf("send: %v; want an error, refused %v", err, tc.refused)
			}
		})
	}
	t.Run("stored once", func(t *testing.T) {
		m := row(f.subject, "k-once", []byte("once"))
		for range 2 {
			if err := s.Send(t.Context(), m); err != nil {
				t.Fatal(err)
			}
		}
		st, err := f.js.Stream(t.Context(), f.stream)
		if err != nil {
			t.Fatal(err)
		}
		if n := st.CachedInfo().State.Msgs; n != 1 {
			t.Errorf("stream holds %d messages, want 1", n)
		}
		got, err := st.GetLastMsgForSubject(t.Context(), f.subject)
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]string{msgkey.Property: "k-once", jetstream.MsgIDHeader: "k-once", "tenant": "acme"} {
			if v := got.Header.Get(name); v != want {
				t.Errorf("header %s = %q, want %q", name, v, want)
			}
		}
	})
}
