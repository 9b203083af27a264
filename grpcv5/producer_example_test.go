package grpcv5_test

import (
	"context"
	"fmt"
	"log"

	golang "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"

	"github.com/idemq/idemq/grpcv5"
	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/msgkey"
)

func ExampleProducer_Stamp() {
	rp, _ := golang.NewProducer(&golang.Config{Endpoint: "127.0.0.1:8081", Credentials: &credentials.SessionCredentials{}})
	gen, _ := idgen.New(7, idgen.Config{})
	p, _ := grpcv5.NewProducer(rp, msgkey.FromIDs(gen))

	m := &golang.Message{Topic: "orders", Body: []byte(`{"order":42}`)}
	_ = p.Stamp(context.Background(), m) // Send stamps too
	key := msgkey.Of(msgkey.Properties(m.GetProperties()))
	_ = p.Stamp(context.Background(), m) // a resend keeps the key

	id, _ := idgen.Parse(key)
	fmt.Println(msgkey.Of(msgkey.Properties(m.GetProperties())) == key, m.GetKeys()[0] == key, gen.Config().Layout.Decode(id).Node)
	// Output: true true 7
}

// A sender through a RocketMQ 5 proxy: a plain send, then a transaction
// whose outcome is left to the broker's check-back, which sees the key the
// half message was stamped with. (Compiled, not run: it needs a proxy.)
func ExampleNewProducer() {
	ctx := context.Background()
	gen, err := idgen.New(7, idgen.Config{}) // or a node leased from Redis: see package remoting
	if err != nil {
		log.Fatal(err)
	}
	applied := func(key string) bool { return false } // did the local transaction with this key commit?
	rp, err := golang.NewProducer(
		&golang.Config{Endpoint: "127.0.0.1:8081", Credentials: &credentials.SessionCredentials{}},
		golang.WithTopics("orders"),
		golang.WithTransactionChecker(&golang.TransactionChecker{
			Check: func(view *golang.MessageView) golang.TransactionResolution {
				if applied(msgkey.Of(msgkey.Properties(view.GetProperties()))) {
					return golang.COMMIT
				}
				return golang.ROLLBACK
			},
		}),
	)
	if err != nil {
		log.Fatal(err)
	}
	if err := rp.Start(); err != nil {
		log.Fatal(err)
	}
	defer rp.GracefulStop()
	sender, err := grpcv5.NewProducer(rp, msgkey.FromIDs(gen))
	if err != nil {
		log.Fatal(err)
	}

	msg := &golang.Message{Topic: "orders", Body: []byte(`{"order":42,"amount":1999}`)}
	// The key is stamped once, before the first attempt; the client's
	// retries and a resend of msg keep it.
	if _, err := sender.Send(ctx, msg); err != nil {
		log.Fatal(err)
	}
	log.Printf("sent order 42 with key %s", msgkey.Of(msgkey.Properties(msg.GetProperties())))

	tx := rp.BeginTransaction()
	paid := &golang.Message{Topic: "orders", Body: []byte(`{"order":42,"paid":true}`)}
	if _, err := sender.SendWithTransaction(ctx, paid, tx); err != nil {
		log.Fatal(err)
	}
	// Record the payment under the key in the local transaction, then
	// tx.Commit(); a crash before that leaves it to the checker above.
	log.Printf("half message with key %s", msgkey.Of(msgkey.Properties(paid.GetProperties())))
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
}
