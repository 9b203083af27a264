package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/internal/sqldialect"
	"github.com/idemq/idemq/msgkey"
)

// DefaultTable is the table an Outbox uses unless [Config.Table] names
// another.
const DefaultTable = "idemq_outbox"

// defaultMaxBody is the broker's default limit on a body (maxMessageSize,
// 4 MiB), and [Config.MaxBody]'s default.
const defaultMaxBody = 4 << 20

// Config holds an Outbox's optional settings. The zero value works.
type Config struct {
	// Table is the name of the table holding the rows: a letter or
	// underscore, then letters, digits and underscores, at most 48 bytes.
	// Default [DefaultTable].
	Table string
	// MaxBody is the largest body Add accepts, in bytes: the broker's
	// maxMessageSize. Default 4 MiB, the broker's default.
	MaxBody int
	// TraceContext, if set, writes the trace context of Add's ctx into a
	// message's properties, unless they hold a traceparent already, so
	// that the row ships it and the consumer's span continues the business
	// transaction's trace. With OpenTelemetry (which this package does not
	// link):
	//
	//	func(ctx context.Context, p map[string]string) {
	//		otel.GetTextMapPropagator().Inject(ctx, propagation.MapCarrier(p))
	//	}
	//
	// Default nil: a message carries what its properties hold.
	TraceContext func(ctx context.Context, props map[string]string)
}

func (c *Config) setDefaults() {
	if c.Table == "" {
		c.Table = DefaultTable
	}
	if c.MaxBody == 0 {
		c.MaxBody = defaultMaxBody
	}
}

// validate reports settings that cannot work.
func (c Config) validate() error {
	switch {
	case !sqldialect.ValidTable(c.Table):
		return fmt.Errorf("outbox: table name %q: want %s", c.Table, sqldialect.TableRule)
	case c.MaxBody <= 0:
		return fmt.Errorf("outbox: max body %d must be positive", c.MaxBody)
	}
	return nil
}

// Outbox writes messages into a table inside the caller's transactions
// ([Outbox.Add]) and is what a [Relay] ships them from. It is safe for
// concurrent use.
type Outbox struct {
	db   *sql.DB
	keys msgkey.Source
	cfg  Config
	q    queries
}

// New returns an Outbox over db, which speaks dialect, stamping keys from
// keys. keys may be nil for an Outbox that only relays or is operated on,
// or whose messages all carry their keys; Add then refuses a message
// without one. New does not touch the database: call [Outbox.Migrate] to
// create the table, or create it from [Outbox.Schema].
func New(db *sql.DB, kind dialect.Dialect, keys msgkey.Source, cfg Config) (*Outbox, error) {
	switch {
	case db == nil:
		return nil, errors.New("outbox: nil *sql.DB")
	case !sqldialect.Valid(kind):
		return nil, fmt.Errorf("outbox: unknown dialect %v", kind)
	}
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Outbox{db: db, keys: keys, cfg: cfg, q: newQueries(kind, cfg.Table)}, nil
}

// Table is the name of the outbox's table.
func (o *Outbox) Table() string { return o.cfg.Table }

// Schema returns the statements that create the table and its indexes.
func (o *Outbox) Schema() []string { return o.q.schema }

// Migrate creates the table and its indexes unless they exist.
func (o *Outbox) Migrate(ctx context.Context) error {
	for _, stmt := range o.q.schema {
		if _, err := o.db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("outbox: migrate: %w", err)
		}
	}
	return nil
}

// nextKey is a new key from the key source.
func (o *Outbox) nextKey(ctx context.Context) (string, error) {
	if o.keys == nil {
		return "", errors.New("no key source: the message must carry its key in " + msgkey.Property)
	}
	return o.keys.NextKey(ctx)
}

// maxRows is the most rows one INSERT carries: 8 parameters a row keep it
// under SQLite's limit on bound parameters.
const maxRows = 256

// Add writes m into the outbox inside tx, the caller's transaction, and
// returns m's key: the one m carries in [msgkey.Property], else a new one
// from the key source, fixed now so that every shipment of the row carries
// it. The row ships once tx commits, and never if it rolls back. m is not
// changed. With [Config.TraceContext] the row carries ctx's trace context
// too.
//
// A message that can never ship is refused with [ErrInvalidMessage], or an
// error wrapping [msgkey.ErrInvalid] for a key that cannot travel.
func (o *Outbox) Add(ctx context.Context, tx *sql.Tx, m Message) (string, error) {
	keys, err := o.AddBatch(ctx, tx, []Message{m})
	if err != nil {
		return "", err
	}
	return keys[0], nil
}

// AddBatch is [Outbox.Add] for msgs, in one INSERT (one per 256 messages);
// rows of one ordering key ship in the order of msgs. It writes nothing if
// any message is refused.
func (o *Outbox) AddBatch(ctx context.Context, tx *sql.Tx, msgs []Message) ([]string, error) {
	return o.add(ctx, tx, msgs, o.nextKey)
}

// add is AddBatch, the key of a message that carries none from next.
func (o *Outbox) add(ctx context.Context, tx *sql.Tx, msgs []Message, next func(context.Context) (string, error)) ([]string, error) {
	if tx == nil {
		return nil, errors.New("outbox: nil *sql.Tx")
	}
	if len(msgs) == 0 {
		return nil, nil
	}
	args := make([]any, 0, 8*len(msgs))
	keys := make([]string, len(msgs))
	for i := range msgs {
		if err := msgs[i].check(o.cfg.MaxBody); err != nil {
			return nil, err
		}
		m, err := stamped(ctx, &msgs[i], next, o.cfg.TraceContext)
		if err != nil {
			return nil, fmt.Errorf("outbox: topic %s: %w", m.Topic, err)
		}
		props, err := json.Marshal(m.Properties)
		if err != nil {
			return nil, fmt.Errorf("outbox: properties: %w", err)
		}
		keys[i] = m.key()
		args = append(args, m.Topic, m.Tags, strings.Join(m.Keys, " "), keys[i], m.OrderingKey, string(props), m.Body, micros(m.Delay))
	}
	for len(args) > 0 {
		n := min(len(args)/8, maxRows)
		if _, err := tx.ExecContext(ctx, o.q.insert(n), args[:8*n]...); err != nil {
			return nil, fmt.Errorf("outbox: insert: %w", err)
		}
		args = args[8*n:]
	}
	return keys, nil
}
