package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/internal/adapter"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/outbox"
)

// TestEmit runs a consume-then-produce handler on every backend: the row
// it emits commits with its message's record, a duplicate emits nothing,
// and a run again after its record is forgotten emits a row with the same
// key, which the consumers downstream suppress.
func TestEmit(t *testing.T) {
	for _, be := range testdb.Backends {
		t.Run(be.Name, func(t *testing.T) {
			ctx := t.Context()
			store, o := emitEnv(t, be)
			c, err := consumer.New(store, "billing", consumer.WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			h, err := c.Tx(func(ctx context.Context, _ *sql.Tx, msg *consumer.Message) error {
				_, err := o.Emit(ctx, "payment", outbox.Message{Topic: "payments", Body: []byte("pay " + msgkey.Of(msg))})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			want, err := msgkey.Derive("order-42", "billing", "payment")
			if err != nil {
				t.Fatal(err)
			}
			deliver := func() adapter.Verdict {
				return adapter.Process(ctx, c, []consumer.Message{{ID: "M1", Properties: map[string]string{msgkey.Property: "order-42"}}}, h, adapter.Waiting{}, nil)[0]
			}
			keys := func() []string {
				rows, err := o.List(ctx, outbox.Pending, 0, 10)
				if err != nil {
					t.Fatal(err)
				}
				var ks []string
				for _, r := range rows {
					ks = append(ks, r.Key)
				}
				return ks
			}

			if v := deliver(); v.Outcome != dedupe.Completed {
				t.Fatalf("first delivery: %+v", v)
			}
			if v := deliver(); v.Outcome != dedupe.Suppressed {
				t.Fatalf("duplicate: %+v", v)
			}
			if got := keys(); len(got) != 1 || got[0] != want {
				t.Fatalf("rows %q after a delivery and its duplicate, want [%s]", got, want)
			}
			// An operator forgets the record: the handler runs again and
			// emits a copy under the same key.
			if ok, err := store.Forget(ctx, dedupe.Ref{Group: "billing", Key: "order-42"}); !ok || err != nil {
				t.Fatalf("Forget = %v, %v", ok, err)
			}
			if v := deliver(); v.Outcome != dedupe.Completed {
				t.Fatalf("delivery after Forget: %+v", v)
			}
			if got := keys(); len(got) != 2 || got[1] != want {
				t.Errorf("rows %q after the handler ran again, want two of %s", got, want)
			}
		})
	}
}

// TestEmitRefuses: an emit that cannot derive its key, or whose row
// cannot ship, fails its handler, and nothing of the handler commits.
func TestEmitRefuses(t *testing.T) {
	ctx := t.Context()
	store, o := emitEnv(t, testdb.SQLite)
	quiet := consumer.WithLogger(slog.New(slog.DiscardHandler))
	txc, err := consumer.New(store, "billing", quiet)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := consumer.New(memdedupe.New(memdedupe.Config{}), "billing", quiet)
	if err != nil {
		t.Fatal(err)
	}
	// Its claims fail as if the store were down, and FailOpen runs the
	// handler without one.
	failOpen, err := consumer.New(claimsFail{store}, "billing", quiet,
		consumer.WithGuard(dedupe.GuardConfig{FailOpen: true}))
	if err != nil {
		t.Fatal(err)
	}
	payment := outbox.Message{Topic: "payments", Body: []byte("pay")}
	for _, tt := range []struct {
		name string
		c    *consumer.Consumer
		tx   bool
		emit func(ctx context.Context) error
		is   error  // the handler's error wraps it
		says string // or says it
	}{{
		name: "outside a transaction", c: plain,
		emit: func(ctx context.Context) error { _, err := o.Emit(ctx, "payment", payment); return err },
		says: "outside a transactional handler",
	}, {
		name: "without a claim", c: failOpen, tx: true,
		emit: func(ctx context.Context) error { _, err := o.Emit(ctx, "payment", payment); return err },
		says: "without a claim",
	}, {
		name: "name with a space", c: txc, tx: true,
		emit: func(ctx context.Context) error { _, err := o.Emit(ctx, "two words", payment); return err },
		is:   msgkey.ErrInvalid,
	}, {
		name: "name over the limit", c: txc, tx: true,
		emit: func(ctx context.Context) error {
			_, err := o.Emit(ctx, strings.Repeat("n", 64+1), payment)
			return err
		},
		is: msgkey.ErrInvalid,
	}, {
		name: "message with a key", c: txc, tx: true,
		emit: func(ctx context.Context) error {
			m := payment
			m.Properties = map[string]string{msgkey.Property: "mine"}
			_, err := o.Emit(ctx, "payment", m)
			return err
		},
		is: outbox.ErrInvalidMessage,
	}} {
		t.Run(tt.name, func(t *testing.T) {
			var herr error
			h := func(ctx context.Context, _ *consumer.Message) error {
				herr = tt.emit(ctx)
				return herr
			}
			if tt.tx {
				var err error
				if h, err = tt.c.Tx(func(ctx context.Context, _ *sql.Tx, _ *consumer.Message) error {
					herr = tt.emit(ctx)
					return herr
				}); err != nil {
					t.Fatal(err)
				}
			}
			key := "order-" + strings.ReplaceAll(tt.name, " ", "-")
			v := adapter.Process(ctx, tt.c, []consumer.Message{{ID: "M", Properties: map[string]string{msgkey.Property: key}}}, h, adapter.Waiting{}, nil)[0]
			if v.Action != adapter.Retry || v.Outcome != dedupe.Failed {
				t.Errorf("verdict %+v, want the message retried", v)
			}
			if herr == nil || tt.is != nil && !errors.Is(herr, tt.is) || tt.says != "" && !strings.Contains(herr.Error(), tt.says) {
				t.Errorf("Emit error %v, want one that wraps %v and says %q", herr, tt.is, tt.says)
			}
			if rows, err := o.List(ctx, outbox.Pending, 0, 10); err != nil || len(rows) != 0 {
				t.Errorf("outbox rows %+v, %v; want none", rows, err)
			}
			if _, found, err := store.Get(ctx, dedupe.Ref{Group: "billing", Key: key}); err != nil || found {
				t.Errorf("dedupe record of %s found: %v, %v; want none, for the transaction rolled back", key, found, err)
			}
		})
	}
}

// emitEnv returns a dedupe store and an outbox without a key source (Emit
// derives every key), both over one fresh database of be, migrated.
func emitEnv(t *testing.T, be testdb.Backend) (*sqldedupe.Store, *outbox.Outbox) {
	t.Helper()
	db := be.Open(t)
	store, err := sqldedupe.New(db, be.Dialect, sqldedupe.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	o, err := outbox.New(db, be.Dialect, nil, outbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := o.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return store, o
}

// claimsFail is a store whose claims in a transaction fail as if it could
// not be reached.
type claimsFail struct{ *sqldedupe.Store }

func (claimsFail) ClaimTx(context.Context, *sql.Tx, dedupe.Item, time.Duration) (dedupe.ClaimResult, error) {
	return dedupe.ClaimResult{}, errors.New("store unreachable")
}
