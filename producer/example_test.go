package producer_test

import (
	"context"
	"fmt"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	rmqproducer "github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/producer"
)

func ExampleProducer_Stamp() {
	rp, _ := rocketmq.NewProducer(rmqproducer.WithNameServer([]string{"127.0.0.1:9876"}))
	gen, _ := idgen.New(7, idgen.Config{})
	p, _ := producer.New(rp, producer.IDKeys(gen))

	m := primitive.NewMessage("orders", []byte(`{"order":42}`))
	_ = p.Stamp(context.Background(), m) // SendSync stamps too
	key := msgkey.Of(m)
	_ = p.Stamp(context.Background(), m) // a resend keeps the key

	parts := gen.Decode(mustParse(key))
	fmt.Println(msgkey.Of(m) == key, m.GetKeys() == key, parts.Node)
	// Output: true true 7
}

func mustParse(s string) idgen.ID {
	id, err := idgen.Parse(s)
	if err != nil {
		panic(err)
	}
	return id
}
