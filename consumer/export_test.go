package consumer

// ErrNoKey lets the external tests tell a message without a key from one
// whose key is invalid: a user sees only the error's text.
var ErrNoKey = errNoKey
