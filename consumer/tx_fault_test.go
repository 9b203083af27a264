package consumer_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/internal/adapter"
	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/sqldialect"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/msgkey"
)

// roleTxHolder is the role of txHolder's child processes.
const roleTxHolder = "txholder"

// holderSettings are a txholder child's.
type holderSettings struct {
	Backend string // a testdb.Backend's name
	DSN     string
	// Keys are delivered as one batch; Hold's handler keeps its
	// transaction open after its write.
	Keys []string
	Hold string
}

// txHolder is a consumer process in transactional mode (the role
// roleTxHolder) that applies the Keys, delivered as one batch, as "child".
// Once Hold's handler has written its row, it says "holding <key>" and
// keeps its transaction open until told "commit", or fails when its
// standard input closes. It says "done ok" once the batch is acknowledged.
func txHolder() error {
	var s holderSettings
	if err := racechild.Settings(&s); err != nil {
		return err
	}
	db, b, err := testdb.OpenNamed(s.Backend, s.DSN)
	if err != nil {
		return err
	}
	defer db.Close()
	store, err := sqldedupe.New(db, b.Dialect, sqldedupe.Config{CleanupInterval: -1})
	if err != nil {
		return err
	}
	defer store.Close()
	c, err := consumer.New(store, txGroup, consumer.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return err
	}
	insert := sqldialect.Of(b.Dialect).Rebind("INSERT INTO applied (k, by_consumer) VALUES (?, ?)")
	h, err := c.Tx(func(ctx context.Context, tx *sql.Tx, m *consumer.Message) error {
		key := msgkey.Of(m)
		if _, err := tx.ExecContext(ctx, insert, key, "child"); err != nil {
			return err
		}
		if key != s.Hold {
			return nil
		}
		racechild.Say("holding %s", key)
		for line := range racechild.Told() {
			if line == "commit" {
				return nil
			}
		}
		return errors.New("told to stop")
	})
	if err != nil {
		return err
	}
	if vs := adapter.Process(context.Background(), c, msgs(s.Keys...), h, adapter.Waiting{}, nil); !acked(vs) {
		return fmt.Errorf("the batch: %+v", vs)
	}
	racechild.Say("done ok")
	return nil
}

// TestTxHolderKilled kills (SIGKILL) a consumer process in transactional
// mode while it holds the last key of a batch, its effect written in the
// open transaction, the batch's other keys committed. The batch's
// redelivery to a consumer of this process finds that key free at once
// (the database rolled the dead process's transaction back), applies it,
// and suppresses the others: each effect applied once, none lost.
func TestTxHolderKilled(t *testing.T) {
	for _, b := range testdb.Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			dsn := b.DSN(t)
			e := newTxEnvDSN(t, b, dsn, true, sqldedupe.Config{})
			keys := []string{"order-1", "order-2", "order-3"}
			holder := racechild.Start(t, roleTxHolder, "holder", holderSettings{Backend: b.Name, DSN: dsn, Keys: keys, Hold: "order-3"})
			holder.Expect(t, "holding order-3", time.Minute)
			holder.Kill(t)

			cb, stats := e.consumer(e.store, e.applier("parent"))
			if vs := cb(t.Context(), msgs(keys...)...); !acked(vs) {
				t.Fatalf("redelivery = %+v; want Ack", vs)
			}
			if stats().Completed != 1 || stats().Suppressed != 2 || stats().Waited != 0 || stats().Retried != 0 {
				t.Errorf("redelivery: completed %d, suppressed %d, waited %d, retried %d; want 1, 2 and the held key free at once",
					stats().Completed, stats().Suppressed, stats().Waited, stats().Retried)
			}
			for key, want := range map[string][]string{"order-1": {"child"}, "order-2": {"child"}, "order-3": {"parent"}} {
				if got := e.applied(key); !slices.Equal(got, want) {
					t.Errorf("%s applied by %q, want %q", key, got, want)
				}
			}
			e.idle()
		})
	}
}

// TestTxHolderPaused stops (SIGSTOP) a consumer process in transactional
// mode while it holds a key: its connection stays open, and so does its
// transaction. A duplicate delivered meanwhile to a consumer whose lock
// timeout is shorter than the pause is busy (waited for in process, then
// handed back no sooner than a delay level), neither failed nor a store
// failure. Once the holder resumes and commits, the redelivery is
// suppressed: one effect.
func TestTxHolderPaused(t *testing.T) {
	for _, b := range testdb.Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			dsn := b.DSN(t)
			e := newTxEnvDSN(t, b, dsn, true, sqldedupe.Config{})
			holder := racechild.Start(t, roleTxHolder, "holder", holderSettings{Backend: b.Name, DSN: dsn, Keys: []string{"order-1"}, Hold: "order-1"})
			holder.Expect(t, "holding order-1", time.Minute)
			holder.Pause(t)

			i := e.impatient()
			cb, stats := i.consumer(i.store, i.applier("parent"), consumer.WithBusyWait(time.Millisecond))
			v := cb(t.Context(), msg("order-1"))[0]
			if v.Action != adapter.Retry || stats().Busy != 1 || stats().Failed != 0 || stats().StoreDown != 0 || stats().Waited == 0 {
				t.Fatalf("duplicate of the paused holder's key = %+v: busy %d, failed %d, store-down %d, waited %d; want busy, waited for",
					v, stats().Busy, stats().Failed, stats().StoreDown, stats().Waited)
			}
			if got := e.applied("order-1"); len(got) != 0 {
				t.Fatalf("applied by %q while the holder is paused, want nobody yet", got)
			}

			holder.Resume(t)
			holder.Tell(t, "commit")
			holder.Expect(t, "done ok", time.Minute)
			holder.Stop()
			holder.Wait(t, time.Minute, nil)
			if vs := cb(t.Context(), msg("order-1")); !acked(vs) || stats().Suppressed != 1 {
				t.Fatalf("redelivery after the holder committed = %+v, suppressed %d; want Ack, suppressed", vs, stats().Suppressed)
			}
			if got := e.applied("order-1"); !slices.Equal(got, []string{"child"}) {
				t.Errorf("applied by %q, want the holder alone", got)
			}
			i.idle()
		})
	}
}
