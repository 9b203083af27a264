package consumer

import "context"

// ErrNoKey lets the external tests tell a message without a key from one
// whose key is invalid: a user sees only the error's text.
var ErrNoKey = errNoKey

// FlushCompletions waits until c's guard has recorded the completions it
// deferred, and reported those that failed.
func FlushCompletions(ctx context.Context, c *Consumer) error { return c.plain.Flush(ctx) }
