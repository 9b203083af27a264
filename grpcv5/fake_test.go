package grpcv5

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-clients/golang/v5"
	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
)

// fakeView is a received message: what a golang.MessageView gives.
type fakeView struct {
	id, topic string
	body      []byte
	props     map[string]string
	keys      []string
	attempt   int32
}

func (v *fakeView) GetMessageId() string             { return v.id }
func (v *fakeView) GetTopic() string                 { return v.topic }
func (v *fakeView) GetBody() []byte                  { return v.body }
func (v *fakeView) GetProperties() map[string]string { return v.props }
func (v *fakeView) GetTag() *string                  { return nil }
func (v *fakeView) GetKeys() []string                { return v.keys }
func (v *fakeView) GetDeliveryAttempt() int32        { return v.attempt }

// newView is a first delivery of a message with key (none if "").
func newView(id, key string) *fakeView {
	v := &fakeView{id: id, topic: "orders", body: []byte("body of " + key), props: map[string]string{}, attempt: 1}
	if key != "" {
		v.props[msgkey.Property] = key
		v.keys = []string{key}
	}
	return v
}

// change is a ChangeInvisibleDuration call.
type change struct {
	id string
	d  time.Duration
}

// fakeSimple is a simple consumer that hands out the messages put in its
// queue and records what is done with them.
type fakeSimple struct {
	mu      sync.Mutex
	queue   []*fakeView
	acked   []string
	changes []change
	asked   []int32 // the batch size of each Receive
	failAck bool
	// failChange fails every ChangeInvisibleDuration, which is recorded
	// all the same.
	failChange bool
	// longPoll makes a Receive with nothing to hand out wait until its
	// context ends, as a proxy holds an idle long poll open.
	longPoll bool
	// failReceives fails that many Receives first, as an unreachable
	// proxy does.
	failReceives int
}

func (f *fakeSimple) put(vs ...*fakeView) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queue = append(f.queue, vs...)
}

func (f *fakeSimple) Receive(ctx context.Context, n int32, _ time.Duration) ([]*fakeView, error) {
	f.mu.Lock()
	f.asked = append(f.asked, n)
	if f.failReceives > 0 {
		f.failReceives--
		f.mu.Unlock()
		return nil, errors.New("proxy unreachable")
	}
	k := min(int(n), len(f.queue))
	vs := slices.Clone(f.queue[:k])
	f.queue = f.queue[k:]
	f.mu.Unlock()
	if k == 0 && f.longPoll {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if k == 0 {
		// A short long poll.
		time.Sleep(5 * time.Millisecond)
		return nil, &golang.ErrRpcStatus{Code: int32(v2.Code_MESSAGE_NOT_FOUND), Message: "no new message"}
	}
	return vs, nil
}

func (f *fakeSimple) Ack(_ context.Context, v *fakeView) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failAck {
		return fmt.Errorf("ack %s failed", v.id)
	}
	f.acked = append(f.acked, v.id)
	return nil
}

func (f *fakeSimple) ChangeInvisibleDuration(v *fakeView, d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.changes = append(f.changes, change{v.id, d})
	if f.failChange {
		return fmt.Errorf("change %s failed", v.id)
	}
	return nil
}

// ackedIDs returns the ids acknowledged, sorted.
func (f *fakeSimple) ackedIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(slices.Values(f.acked))
}

func (f *fakeSimple) changesOf(id string) []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ds []time.Duration
	for _, c := range f.changes {
		if c.id == id {
			ds = append(ds, c.d)
		}
	}
	return ds
}

// ledger is the effect under test: how often each key was applied; a key
// in fail fails that many times first.
type ledger struct {
	mu      sync.Mutex
	applied map[string]int
	fail    map[string]int
	block   chan struct{} // if set, handlers wait for it (or their context)
}

func newLedger() *ledger { return &ledger{applied: map[string]int{}, fail: map[string]int{}} }

func (l *ledger) handle(ctx context.Context, m *consumer.Message) error {
	if l.block != nil {
		select {
		case <-l.block:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	key := msgkey.Of(m)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail[key] > 0 {
		l.fail[key]--
		return fmt.Errorf("%s fails", key)
	}
	l.applied[key]++
	return nil
}

func (l *ledger) count(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.applied[key]
}

// newConsumer is a Consumer on store whose logs go to t.
func newConsumer(t *testing.T, store dedupe.Store, opts ...consumer.Option) *consumer.Consumer {
	t.Helper()
	opts = append([]consumer.Option{consumer.WithLogger(slog.New(slog.NewTextHandler(t.Output(), nil)))}, opts...)
	c, err := consumer.New(store, "grpc-group", opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startReceiver runs a receiver of f until the test ends, and returns it
// and a function that stops it and returns Run's error.
func startReceiver(t *testing.T, c *consumer.Consumer, f *fakeSimple, h consumer.Handler, cfg SimpleConfig) (*receiver[*fakeView], func() error) {
	t.Helper()
	r, err := newReceiver(c, client[*fakeView](f), h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- r.run(context.Background()) }()
	testkit.WaitFor(t, "Run", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.state == running
	})
	var once sync.Once
	var err2 error
	stop := func() error {
		once.Do(func() {
			r.close()
			err2 = <-errc
		})
		return err2
	}
	t.Cleanup(func() { stop() })
	return r, stop
}

// hold claims key in store for another consumer, for lease.
func hold(t *testing.T, store dedupe.Store, key string, lease time.Duration) dedupe.Ticket {
	t.Helper()
	ref := dedupe.Ref{Group: "grpc-group", Key: key}
	res, err := testkit.Claim(context.Background(), store, dedupe.Item{Ref: ref}, lease)
	if err != nil || res.Outcome != dedupe.Acquired {
		t.Fatalf("claim %s: %v, %v", key, res.Outcome, err)
	}
	return dedupe.Ticket{Ref: ref, Token: res.Token}
}

func newStore() *memdedupe.Store { return memdedupe.New(memdedupe.Config{}) }
