// Package rmqcall sends single requests over RocketMQ's remoting protocol,
// for what rocketmq-client-go has no exported call for: the test harness's
// topic and group administration (internal/testenv) and the unlock of the
// queues a rebalance takes from an orderly consumer (remoting.HandBack), and
// the broker's query of a topic's messages by key (idemq key).
package rmqcall

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"regexp"
	"time"
)

// Request codes (RocketMQ's RequestCode.java).
const (
	ReqQueryMessage                     = 12
	ReqUpdateAndCreateTopic             = 17
	ReqGetBrokerRuntimeInfo             = 28
	ReqLockBatchMQ                      = 41
	ReqUnlockBatchMQ                    = 42
	ReqGetRouteInfoByTopic              = 105
	ReqGetBrokerClusterInfo             = 106
	ReqUpdateAndCreateSubscriptionGroup = 200
	ReqGetConsumeStats                  = 208
)

// Response codes (RocketMQ's ResponseCode.java) that callers tell apart.
const (
	RespTopicNotExist = 17
	RespQueryNotFound = 22
)

// A ResponseError is a response other than success: its code and remark.
type ResponseError struct {
	Code   int
	Remark string
}

func (e *ResponseError) Error() string { return fmt.Sprintf("response code %d: %s", e.Code, e.Remark) }

// Call sends one request, code with the header fields fields and body, to
// the name server or broker at addr ("host:port") on a connection of its
// own (JSON headers, no TLS, no ACL signature), and returns the body of a
// successful response. An answer other than success is a *ResponseError.
func Call(ctx context.Context, addr string, code int, fields map[string]string, body []byte) ([]byte, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	// Unblocks the reads and writes below when ctx ends.
	defer context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })()

	header, err := json.Marshal(struct {
		Code      int               `json:"code"`
		Language  string            `json:"language"`
		Version   int               `json:"version"`
		Opaque    int               `json:"opaque"`
		Flag      int               `json:"flag"`
		ExtFields map[string]string `json:"extFields,omitempty"`
	}{Code: code, Language: "GO", Version: 317, Opaque: 1, ExtFields: fields})
	if err != nil {
		return nil, err
	}
	// Frame: total length, then header length whose high byte 0 says JSON.
	frame := binary.BigEndian.AppendUint32(nil, uint32(4+len(header)+len(body)))
	frame = binary.BigEndian.AppendUint32(frame, uint32(len(header)))
	frame = append(append(frame, header...), body...)
	if _, err := conn.Write(frame); err != nil {
		return nil, err
	}

	var size uint32
	if err := binary.Read(conn, binary.BigEndian, &size); err != nil {
		return nil, err
	}
	if size < 4 || size > 16<<20 {
		return nil, fmt.Errorf("response frame of %d bytes", size)
	}
	resp := make([]byte, size)
	if _, err := io.ReadFull(conn, resp); err != nil {
		return nil, err
	}
	mark := binary.BigEndian.Uint32(resp)
	headerLen := mark & 0xFFFFFF
	if mark>>24 != 0 || 4+headerLen > size {
		return nil, fmt.Errorf("response header mark %#x: not a JSON header", mark)
	}
	var h struct {
		Code   int    `json:"code"`
		Remark string `json:"remark"`
	}
	if err := json.Unmarshal(resp[4:4+headerLen], &h); err != nil {
		return nil, fmt.Errorf("response header: %w", err)
	}
	if h.Code != 0 {
		return nil, &ResponseError{Code: h.Code, Remark: h.Remark}
	}
	return resp[4+headerLen:], nil
}

// Masters returns the address of the master broker of each broker name
// that serves topic, as the name server at nameServer routes it.
func Masters(ctx context.Context, nameServer, topic string) (map[string]string, error) {
	body, err := Call(ctx, nameServer, ReqGetRouteInfoByTopic, map[string]string{"topic": topic}, nil)
	if err != nil {
		return nil, err
	}
	var route struct {
		BrokerDatas []struct {
			BrokerName  string            `json:"brokerName"`
			BrokerAddrs map[string]string `json:"brokerAddrs"`
		} `json:"brokerDatas"`
	}
	if err := json.Unmarshal(quoteIntKeys(body), &route); err != nil {
		return nil, fmt.Errorf("route of %q: %w", topic, err)
	}
	masters := make(map[string]string, len(route.BrokerDatas))
	for _, b := range route.BrokerDatas {
		if addr, ok := b.BrokerAddrs["0"]; ok { // broker id 0 is the master
			masters[b.BrokerName] = addr
		}
	}
	return masters, nil
}

// quoteIntKeys returns the JSON js with its integer object keys quoted:
// name servers write maps keyed by broker id as {0:"host:port"}, which
// encoding/json rejects.
func quoteIntKeys(js []byte) []byte {
	out := make([]byte, 0, len(js)+8)
	var (
		open              []byte // the unclosed '{' and '['
		inString, escaped bool
		keyNext           bool // a key may start here
	)
	for i := 0; i < len(js); i++ {
		c := js[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString, keyNext = true, false
		case c == '{' || c == '[':
			open, keyNext = append(open, c), c == '{'
		case c == '}' || c == ']':
			if len(open) > 0 {
				open = open[:len(open)-1]
			}
			keyNext = false
		case c == ',':
			keyNext = len(open) > 0 && open[len(open)-1] == '{'
		case keyNext && (c == '-' || '0' <= c && c <= '9'):
			j := i + 1
			for j < len(js) && '0' <= js[j] && js[j] <= '9' {
				j++
			}
			out = append(append(append(out, '"'), js[i:j]...), '"')
			i, keyNext = j-1, false
			continue
		case c != ' ' && c != '\n' && c != '\t' && c != '\r':
			keyNext = false
		}
		out = append(out, c)
	}
	return out
}

// topicRule is RocketMQ's rule for a topic's name (TopicValidator): both
// generations refuse any other.
var topicRule = regexp.MustCompile(`^[%|a-zA-Z0-9_-]{1,127}$`)

// CheckTopic says why RocketMQ refuses topic as a name, or nil: the
// outbox takes names other brokers accept ('.', as in NATS subjects and
// many Kafka topics), and a RocketMQ sender parks a row of such a topic
// rather than send it to a broker that refuses it every time.
func CheckTopic(topic string) error {
	if !topicRule.MatchString(topic) {
		return fmt.Errorf("topic %q: RocketMQ takes 1 to 127 of letters, digits, _ - %% |", topic)
	}
	return nil
}
