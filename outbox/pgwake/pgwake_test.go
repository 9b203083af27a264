package pgwake_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/outbox"
	"github.com/idemq/idemq/outbox/pgwake"
)

func TestMain(m *testing.M) { os.Exit(testenv.Run(m)) }

// bodies is a Sender that keeps the bodies it was given.
type bodies struct{ testkit.Received[string] }

func (b *bodies) Send(_ context.Context, m *outbox.Message) error {
	b.Add(string(m.Body))
	return nil
}

// await waits until n rows shipped.
func (b *bodies) await(t *testing.T, n int) []string {
	t.Helper()
	return b.Await(t, fmt.Sprintf("%d rows shipped", n), func(got []string) bool { return len(got) == n })
}

// TestWakeAcrossRestart runs a relay that polls once an hour over a
// PostgreSQL of the test's own: committed rows ship only because the
// trigger's notification wakes it, also after the server restarted and
// the listener connected again, which it logs; a rolled-back row ships
// nothing.
func TestWakeAcrossRestart(t *testing.T) {
	logs := new(testkit.Buffer)
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(logs, nil)))
	pg := testenv.StartPrivatePostgres(t)
	db, err := sql.Open("pgx", pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	o, err := outbox.New(db, dialect.Postgres, testkit.Keys(t, 1), outbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := o.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 { // Install replaces what it installed
		if err := pgwake.Install(ctx, db, outbox.DefaultTable); err != nil {
			t.Fatal(err)
		}
	}
	l, err := pgwake.Listen(ctx, pg.DSN(), outbox.DefaultTable)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	got := new(bodies)
	r, err := outbox.NewRelay(o, got, outbox.RelayConfig{PollInterval: time.Hour, Wake: l.C, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })

	// add adds a row with body in a transaction it commits or rolls back.
	// A transaction that fails before its commit (a pooled connection the
	// restart closed) added nothing and is tried again.
	add := func(body string, commit bool) {
		t.Helper()
		for attempt := 0; ; attempt++ {
			tx, err := db.BeginTx(ctx, nil)
			if err == nil {
				if _, err = o.Add(ctx, tx, outbox.Message{Topic: "orders", Body: []byte(body)}); err == nil {
					if !commit {
						tx.Rollback()
						return
					}
					if err := tx.Commit(); err != nil {
						t.Fatal(err)
					}
					return
				}
				tx.Rollback()
			}
			if attempt == 10 {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	add("first", true) // perhaps shipped by the relay's first look
	got.await(t, 1)
	add("second", true) // shipped by a wake: the relay waits an hour
	got.await(t, 2)
	add("rolled back", false)
	if err := pg.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	add("after the restart", true)
	if shipped, want := got.await(t, 3), []string{"first", "second", "after the restart"}; !slices.Equal(shipped, want) {
		t.Errorf("shipped %q, want %q", shipped, want)
	}
	for _, want := range []string{"level=WARN msg=\"pgwake: lost the listening connection", "level=INFO msg=\"pgwake: listening again\""} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %s:\n%s", want, logs)
		}
	}
}
