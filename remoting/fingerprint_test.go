package remoting_test

import (
	"context"
	"testing"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/consumer"
)

// withBody returns a message with key and body.
func withBody(key, body string) *primitive.MessageExt {
	m := msg(key)
	m.Body = []byte(body)
	return m
}

// TestTxReusedKey checks that Consumer.Tx neither runs nor commits a reused
// key's other body, unless the check is turned off.
func TestTxReusedKey(t *testing.T) {
	for _, d := range txBackends {
		for _, tt := range []struct {
			name         string
			opts         []consumer.Option
			wantConflict bool
		}{
			{"Default", nil, true},
			{"WithoutFingerprint", []consumer.Option{consumer.WithoutFingerprint()}, false},
		} {
			t.Run(d.Name+"/"+tt.name, func(t *testing.T) {
				e := newTxEnv(t, d)
				cb, stats := e.consumer(e.store, e.applier("A"), tt.opts...)
				if res, err := cb(context.Background(), withBody("k", "A")); res != rmq.ConsumeSuccess {
					t.Fatalf("first delivery: %v, %v", res, err)
				}
				res, err := cb(context.Background(), withBody("k", "B"))
				if tt.wantConflict != (stats().Reused == 1) || tt.wantConflict != (res == rmq.ConsumeRetryLater) {
					t.Errorf("other body: %v, %v, reused %d; want reused: %v", res, err, stats().Reused, tt.wantConflict)
				}
				if got := e.applied("k"); len(got) != 1 {
					t.Errorf("applied by %v, want once", got)
				}
				if n := stats().Reused + stats().Suppressed; n != 1 {
					t.Errorf("Reused %d + Suppressed %d, want 1 in all", stats().Reused, stats().Suppressed)
				}
				e.idle()
			})
		}
	}
}
