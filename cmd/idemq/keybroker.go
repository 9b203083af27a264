package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/internal/rmqcall"
	"github.com/idemq/idemq/msgkey"
)

// rocketmq-client-go has no exported query by key (its internal package
// defines QUERY_MESSAGE's header, and no call sends it; the gRPC client and
// protocol have none), so 'idemq key' sends the request itself, as the Java
// admin's queryMsgByKey does, and decodes the answer with the client's
// primitive.DecodeMessage.

// maxCopies is how many copies a topic's query asks each broker for: the
// most a broker answers (its maxMsgsNumBatch, 64 by default).
const maxCopies = 64

// brokerTopic is a topic to look for copies in, and why.
type brokerTopic struct{ topic, why string }

type keyBroker struct {
	NameServer string     `json:"namesrv"`
	Topics     []keyTopic `json:"topics"`
	// Error is set when the name server cannot be reached: no topic was
	// asked after it.
	Error string `json:"error,omitempty"`
}

// keyTopic is what the brokers of one topic hold of the key.
type keyTopic struct {
	Topic string `json:"topic"`
	// Why says what named the topic: --topic, an outbox row, a group.
	Why string `json:"why"`
	// Exists is false for a topic the name server has no route for.
	Exists bool         `json:"exists"`
	Copies []brokerCopy `json:"copies"`
	Error  string       `json:"error,omitempty"`
}

// brokerCopy is one stored copy of a message that carries the key.
type brokerCopy struct {
	Broker      string `json:"broker"`
	Queue       int    `json:"queue"`
	QueueOffset int64  `json:"queue_offset"`
	MsgID       string `json:"msg_id"`
	OffsetMsgID string `json:"offset_msg_id"`
	Born        string `json:"born"`
	BornHost    string `json:"born_host"`
	Stored      string `json:"stored"`
	Reconsumes  int32  `json:"reconsumes"`
	// KeyProperty is the key the copy carries in msgkey.Property, ""
	// when it is only among its Keys.
	KeyProperty string `json:"key_property"`
}

// findCopies asks the brokers of each topic, through the name server at
// namesrv, for the copies of messages that carry key.
func findCopies(ctx context.Context, namesrv string, search []brokerTopic, key string) *keyBroker {
	out := &keyBroker{NameServer: namesrv, Topics: []keyTopic{}}
	seen := map[string]bool{}
	for _, s := range search {
		if seen[s.topic] {
			continue
		}
		seen[s.topic] = true
		kt := keyTopic{Topic: s.topic, Why: s.why, Copies: []brokerCopy{}}
		masters, err := rmqcall.Masters(ctx, namesrv, s.topic)
		var re *rmqcall.ResponseError
		switch {
		case errors.As(err, &re) && re.Code == rmqcall.RespTopicNotExist:
			out.Topics = append(out.Topics, kt)
			continue
		case errors.As(err, &re):
			kt.Error = fmt.Sprintf("route of topic %s at name server %s: %v", s.topic, namesrv, err)
			out.Topics = append(out.Topics, kt)
			continue
		case err != nil:
			out.Error = fmt.Sprintf("name server at %s: %v; check that it runs and that --namesrv names it", namesrv, err)
			return out
		}
		kt.Exists = true
		for _, name := range slices.Sorted(maps.Keys(masters)) {
			copies, err := queryByKey(ctx, masters[name], s.topic, key)
			if err != nil {
				kt.Error = fmt.Sprintf("broker %s at %s: query by key: %v", name, masters[name], err)
				break
			}
			for _, c := range copies {
				c.Broker = name
				kt.Copies = append(kt.Copies, c)
			}
		}
		slices.SortFunc(kt.Copies, func(a, b brokerCopy) int { return strings.Compare(a.Stored, b.Stored) })
		out.Topics = append(out.Topics, kt)
	}
	return out
}

// queryByKey sends QUERY_MESSAGE for key in topic to the broker at addr,
// over its whole commit log, and returns the copies that carry key: the
// index is a hash table, whose answers may hold messages of other keys.
func queryByKey(ctx context.Context, addr, topic, key string) ([]brokerCopy, error) {
	body, err := rmqcall.Call(ctx, addr, rmqcall.ReqQueryMessage, map[string]string{
		"topic":          topic,
		"key":            key,
		"maxNum":         strconv.Itoa(maxCopies),
		"beginTimestamp": "0",
		"endTimestamp":   strconv.FormatInt(math.MaxInt64, 10),
	}, nil)
	var re *rmqcall.ResponseError
	if errors.As(err, &re) && re.Code == rmqcall.RespQueryNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	msgs, err := decodeMessages(body)
	if err != nil {
		return nil, err
	}
	var copies []brokerCopy
	for _, m := range msgs {
		if m.Topic != topic || (msgkey.Of(m) != key && !slices.Contains(strings.Fields(m.GetKeys()), key)) {
			continue
		}
		copies = append(copies, brokerCopy{
			Queue:       m.Queue.QueueId,
			QueueOffset: m.QueueOffset,
			MsgID:       m.MsgId,
			OffsetMsgID: m.OffsetMsgId,
			Born:        fmtTime(time.UnixMilli(m.BornTimestamp)),
			BornHost:    m.BornHost,
			Stored:      fmtTime(time.UnixMilli(m.StoreTimestamp)),
			Reconsumes:  m.ReconsumeTimes,
			KeyProperty: msgkey.Of(m),
		})
	}
	return copies, nil
}

// decodeMessages decodes a broker's stored messages. The client's decoder
// trusts its input, and a broker that answers garbage must not crash the
// command.
func decodeMessages(body []byte) (msgs []*primitive.MessageExt, err error) {
	defer func() {
		if r := recover(); r != nil {
			msgs, err = nil, fmt.Errorf("the answer's %d bytes are not stored messages: %v", len(body), r)
		}
	}()
	return primitive.DecodeMessage(body), nil
}

// printCopies writes the brokers' part of a key report.
func printCopies(w io.Writer, b *keyBroker) {
	fmt.Fprintf(w, "\nBROKER COPIES (name server %s)\n", b.NameServer)
	if b.Error != "" {
		fmt.Fprintf(w, "error: %s\n", b.Error)
		return
	}
	fmt.Fprintln(w, "TOPIC\tBROKER\tQUEUE\tOFFSET\tSTORED\tRECONSUMES\tMSG ID\tWHY")
	for _, t := range b.Topics {
		switch {
		case t.Error != "":
			fmt.Fprintf(w, "%s\terror: %s\n", t.Topic, t.Error)
		case !t.Exists:
			fmt.Fprintf(w, "%s\t(no such topic)\t\t\t\t\t\t%s\n", t.Topic, t.Why)
		case len(t.Copies) == 0:
			fmt.Fprintf(w, "%s\t(none)\t\t\t\t\t\t%s\n", t.Topic, t.Why)
		}
		for _, c := range t.Copies {
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\t%d\t%s\t%s\n", t.Topic, c.Broker, c.Queue, c.QueueOffset, c.Stored, c.Reconsumes, c.MsgID, t.Why)
		}
	}
}
