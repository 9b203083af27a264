package msgkey

import (
	"context"
	"fmt"
	"slices"
)

// Stamp returns the key a message is to carry and its Keys (the broker
// indexes them) with the key among them. The key is the one m carries in
// [Property] already (a business key, or the key of an earlier attempt, so
// that every resend carries the same one), else a new one from next; it is
// validated, and added to keys unless they hold it. The caller then sets
// the key in Property and the Keys: stamping a message twice changes
// nothing. An invalid key wraps [ErrInvalid], and next's error is wrapped;
// on error the caller changes nothing.
//
// This is the rule every producer adapter, and package outbox, follows.
func Stamp(ctx context.Context, m interface{ GetProperty(name string) string }, keys []string, next func(context.Context) (string, error)) (key string, withKey []string, err error) {
	key = Of(m)
	if key == "" {
		k, err := next(ctx)
		if err != nil {
			return "", nil, fmt.Errorf("new key: %w", err)
		}
		key = k
	}
	if err := Validate(key); err != nil {
		return "", nil, err
	}
	if !slices.Contains(keys, key) {
		keys = append(slices.Clip(keys), key)
	}
	return key, keys, nil
}

// Properties is a message, for [Of] and [Stamp], whose user properties come as a
// map, as the gRPC client's (rocketmq-clients/golang/v5) Message and
// MessageView give them:
//
//	key := msgkey.Of(msgkey.Properties(view.GetProperties()))
type Properties map[string]string

// GetProperty returns the property name, or "".
func (p Properties) GetProperty(name string) string { return p[name] }
