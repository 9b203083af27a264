package outbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/idemq/idemq/msgkey"
)

// Message is one message to ship: what a RocketMQ message holds, plus the
// row's ordering key and delay.
type Message struct {
	// Topic is the topic (a NATS subject): letters, digits, '_', '-',
	// '%', '|' and '.', at most 127 bytes (RocketMQ's rule, and the '.' of
	// Kafka's and NATS's names, which RocketMQ's senders refuse).
	Topic string
	// Tags is the message's tag, for consumers' filters. Optional.
	Tags string
	// Keys are the message's keys, which the broker indexes. The message
	// key ([msgkey.Property]) is added to them when it is stamped.
	Keys []string
	// Body is the payload: not empty, at most [Config.MaxBody] bytes.
	Body []byte
	// Properties are user properties. A key in [msgkey.Property] is kept
	// as the message's key (a business key such as an order number).
	Properties map[string]string
	// OrderingKey orders messages: rows with the same non-empty ordering
	// key ship one after another in the order they were added, and a row
	// that fails holds back the later rows of its key (not of other keys).
	// It is also the sharding key (remoting) or message group (gRPC) that
	// puts them in one queue of an orderly topic. Empty: no order.
	OrderingKey string
	// Delay holds the row back: it ships no sooner than Delay after Add, by
	// the database's clock. With an ordering key it holds back the later
	// rows of that key too. Zero ships at once.
	Delay time.Duration
}

// traceParent is the property of a W3C trace context's parent: a message
// that carries one keeps it.
const traceParent = "traceparent"

// key returns the message's key, or "" before it is stamped.
func (m *Message) key() string { return m.Properties[msgkey.Property] }

// ErrInvalidMessage is what Add returns for input that can never ship (a
// topic no broker takes, an empty or oversized body, a separator in a
// property, tag, key or ordering key, a negative delay), so that a bad
// message fails the caller's transaction rather than parks in the table;
// its text says what is wrong. An invalid message key wraps
// [msgkey.ErrInvalid] as well.
var ErrInvalidMessage = errors.New("outbox: invalid message")

// maxTopic is RocketMQ's limit on a topic's length (TopicValidator), under
// Kafka's (249).
const maxTopic = 127

// maxField bounds tags and ordering keys: they sit in index-sized columns.
const maxField = 255

// topicRule takes what a broker may take: RocketMQ's characters and '.',
// which Kafka topics and NATS subjects use (a RocketMQ sender parks a row
// whose topic has one). NATS's wildcards and a space can never be sent.
var topicRule = regexp.MustCompile(`^[%|a-zA-Z0-9_.-]+$`)

// reservedChar reports characters that cannot travel in a property or tag:
// RocketMQ separates properties with \x01 and \x02.
func reservedChar(s string) bool {
	return strings.ContainsFunc(s, unicode.IsControl) || !utf8.ValidString(s)
}

// check reports why m cannot ship, before its key is stamped.
func (m *Message) check(maxBody int) error {
	switch {
	case m.Topic == "" || len(m.Topic) > maxTopic || !topicRule.MatchString(m.Topic):
		return fmt.Errorf("%w: topic %q: want 1 to %d of letters, digits, _ - . %% |", ErrInvalidMessage, m.Topic, maxTopic)
	case len(m.Body) == 0:
		return fmt.Errorf("%w: empty body", ErrInvalidMessage)
	case len(m.Body) > maxBody:
		return fmt.Errorf("%w: body of %d bytes, limit %d", ErrInvalidMessage, len(m.Body), maxBody)
	case len(m.Tags) > maxField || reservedChar(m.Tags):
		return fmt.Errorf("%w: tags %q", ErrInvalidMessage, m.Tags)
	case len(m.OrderingKey) > maxField || reservedChar(m.OrderingKey):
		return fmt.Errorf("%w: ordering key %q", ErrInvalidMessage, m.OrderingKey)
	case m.Delay < 0:
		return fmt.Errorf("%w: negative delay %v", ErrInvalidMessage, m.Delay)
	}
	for _, k := range m.Keys {
		// Keys travel space-separated, under the rules of a message key.
		if err := msgkey.Validate(k); err != nil {
			return fmt.Errorf("%w: keys: %w", ErrInvalidMessage, err)
		}
	}
	for name, v := range m.Properties {
		if name == "" || reservedChar(name) || reservedChar(v) {
			return fmt.Errorf("%w: property %q", ErrInvalidMessage, name)
		}
	}
	return nil
}

// stamped returns a copy of m with its key stamped by msgkey's rule: the
// key m carries, else one from next; and ctx's trace context written by
// trace, if set, unless m carries one. m itself is not changed.
func stamped(ctx context.Context, m *Message, next func(context.Context) (string, error), trace func(context.Context, map[string]string)) (Message, error) {
	c := *m
	c.Properties = maps.Clone(m.Properties)
	if c.Properties == nil {
		c.Properties = map[string]string{}
	}
	c.Keys = slices.Clone(m.Keys)
	key, withKey, err := msgkey.Stamp(ctx, msgkey.Properties(c.Properties), c.Keys, next)
	if err != nil {
		return Message{}, err
	}
	c.Properties[msgkey.Property], c.Keys = key, withKey
	if trace != nil && c.Properties[traceParent] == "" {
		trace(ctx, c.Properties)
	}
	return c, nil
}
