package msgkey

import (
	"context"
	"fmt"
	"slices"
)

// Message is a message [Stamp] can give a key: its user properties can be
// read and set, and its Keys (the broker indexes them) read and replaced.
// The package wrapping each RocketMQ client fits that client's message type
// to it with a small adapter.
type Message interface {
	Carrier
	SetProperty(name, value string)
	Keys() []string
	SetKeys(keys []string)
}

// Stamp gives m its key and returns it. The key is the one m carries in
// [Property] already (a business key, or the key of an earlier attempt, so
// that every resend carries the same one), else a new one from next. It is
// validated, set in Property and added to m's Keys unless they hold it. On
// error m is unchanged: an invalid key wraps [ErrInvalid], and next's error
// is wrapped.
//
// This is the rule every producer adapter follows; stamping a message twice
// changes nothing.
func Stamp(ctx context.Context, m Message, next func(context.Context) (string, error)) (string, error) {
	key := Of(m)
	if key == "" {
		k, err := next(ctx)
		if err != nil {
			return "", fmt.Errorf("new key: %w", err)
		}
		key = k
	}
	if err := Validate(key); err != nil {
		return "", err
	}
	m.SetProperty(Property, key)
	if keys := m.Keys(); !slices.Contains(keys, key) {
		m.SetKeys(append(slices.Clip(keys), key))
	}
	return key, nil
}

// Properties is a [Carrier] for a message whose user properties come as a
// map, as the gRPC client's (rocketmq-clients/golang/v5) Message and
// MessageView give them:
//
//	key := msgkey.Of(msgkey.Properties(view.GetProperties()))
type Properties map[string]string

// GetProperty returns the property name, or "".
func (p Properties) GetProperty(name string) string { return p[name] }
