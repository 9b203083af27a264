package producer_test

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	rmqproducer "github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/producer"
)

// localTx commits or rolls back by body, and records the key each local
// transaction saw.
type localTx struct {
	mu   sync.Mutex
	seen map[string]string // body → key
}

func (l *localTx) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen[string(m.Body)] = msgkey.Of(m)
	if string(m.Body) == "rollback" {
		return primitive.RollbackMessageState
	}
	return primitive.CommitMessageState
}

func (l *localTx) CheckLocalTransaction(*primitive.MessageExt) primitive.LocalTransactionState {
	return primitive.CommitMessageState
}

// TestTransactionStampsBeforeTheHalfMessage sends committed and rolled back
// messages in transactions through the real broker: each local transaction
// sees its message's key, the committed ones reach a consumer with their
// keys, the rolled back one never does.
func TestTransactionStampsBeforeTheHalfMessage(t *testing.T) {
	ns := testenv.RocketMQ(t)
	run := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	topic := "producer-tx-" + run
	got := consumeTopic(t, ns, topic)

	l := &localTx{seen: map[string]string{}}
	tp, err := rocketmq.NewTransactionProducer(l,
		rmqproducer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns})),
		rmqproducer.WithGroupName("producer-tx-"+run),
		rmqproducer.WithInstanceName("producer-tx-"+run),
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tp.Shutdown() })
	gen, err := idgen.New(6, idgen.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := producer.NewTransactional(tp, producer.IDKeys(gen))
	if err != nil {
		t.Fatal(err)
	}

	sent := map[string]*primitive.Message{}
	// "after" is committed after the rollback: once it has arrived, the
	// queue (one only) was read past where a delivered rollback would be.
	for _, body := range []string{"commit", "rollback", "after"} {
		m := primitive.NewMessage(topic, []byte(body))
		res, err := p.SendMessageInTransaction(t.Context(), m)
		if err != nil {
			t.Fatal(err)
		}
		if msgkey.Of(m) == "" {
			t.Fatalf("%s: no key stamped", body)
		}
		t.Logf("%s: key %s, local transaction %v", body, msgkey.Of(m), res.State)
		sent[body] = m
	}
	l.mu.Lock()
	for body, m := range sent {
		if l.seen[body] != msgkey.Of(m) {
			t.Errorf("%s: the local transaction saw key %q, want %q", body, l.seen[body], msgkey.Of(m))
		}
	}
	l.mu.Unlock()

	msgs := got.await(t, "the committed messages", func(ms []*primitive.MessageExt) bool { return bodies(ms)["after"] > 0 })
	checkKey(t, msgs, "commit", msgkey.Of(sent["commit"]))
	checkKey(t, msgs, "after", msgkey.Of(sent["after"]))
	if n := bodies(msgs); n["commit"] == 0 || n["rollback"] > 0 {
		t.Errorf("received %v: want the committed messages and not the rolled back one", n)
	}
}

// TestTransactionRefusesBadInput sends nothing for a message whose preset
// key cannot travel, and refuses a nil producer or key source.
func TestTransactionRefusesBadInput(t *testing.T) {
	// Never started: a send that reached it would fail another way.
	tp, err := rocketmq.NewTransactionProducer(&localTx{seen: map[string]string{}},
		rmqproducer.WithNsResolver(primitive.NewPassthroughResolver([]string{"127.0.0.1:1"})))
	if err != nil {
		t.Fatal(err)
	}
	gen, err := idgen.New(6, idgen.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := producer.NewTransactional(nil, producer.IDKeys(gen)); err == nil {
		t.Error("NewTransactional accepted a nil producer")
	}
	if _, err := producer.NewTransactional(tp, nil); err == nil {
		t.Error("NewTransactional accepted a nil key source")
	}
	p, err := producer.NewTransactional(tp, producer.IDKeys(gen))
	if err != nil {
		t.Fatal(err)
	}
	m := primitive.NewMessage("orders", []byte("x"))
	m.WithProperty(msgkey.Property, "order 42") // a space: Keys are space-separated
	if _, err := p.SendMessageInTransaction(t.Context(), m); !errors.Is(err, msgkey.ErrInvalid) {
		t.Fatalf("SendMessageInTransaction = %v, want an error wrapping msgkey.ErrInvalid", err)
	}
}
