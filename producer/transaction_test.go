package producer_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	rmqconsumer "github.com/apache/rocketmq-client-go/v2/consumer"
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
	testenv.RocketMQTopic(t, topic, 1)

	var mu sync.Mutex
	got := map[string]string{} // body → key
	c, err := rocketmq.NewPushConsumer(
		rmqconsumer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns})),
		rmqconsumer.WithGroupName("producer-tx-"+run),
		rmqconsumer.WithInstance("producer-tx-"+run),
		rmqconsumer.WithConsumeFromWhere(rmqconsumer.ConsumeFromFirstOffset),
	)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Subscribe(topic, rmqconsumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (rmqconsumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			got[string(m.Body)] = msgkey.Of(m)
		}
		return rmqconsumer.ConsumeSuccess, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Shutdown() })

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

	msgs := map[string]*primitive.Message{}
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
		msgs[body] = m
	}
	l.mu.Lock()
	for body, m := range msgs {
		if l.seen[body] != msgkey.Of(m) {
			t.Errorf("%s: the local transaction saw key %q, want %q", body, l.seen[body], msgkey.Of(m))
		}
	}
	l.mu.Unlock()

	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		_, after := got["after"]
		mu.Unlock()
		if after {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the committed messages never arrived")
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, body := range []string{"commit", "after"} {
		if got[body] != msgkey.Of(msgs[body]) {
			t.Errorf("%s arrived with key %q, want %q", body, got[body], msgkey.Of(msgs[body]))
		}
	}
	if _, ok := got["rollback"]; ok {
		t.Error("the rolled back message was delivered")
	}
}
