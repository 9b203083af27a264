// Package pgwake wakes outbox relays on PostgreSQL when rows are
// committed, by LISTEN/NOTIFY, instead of at their next poll.
//
//	err := pgwake.Install(ctx, db, outbox.DefaultTable) // once, after Migrate
//	...
//	l, err := pgwake.Listen(ctx, dsn, outbox.DefaultTable)
//	defer l.Close()
//	relay, err := outbox.NewRelay(ob, s, outbox.RelayConfig{Wake: l.C, PollInterval: time.Second})
//
// Install adds a statement trigger to the outbox table that notifies the
// channel named after the table. PostgreSQL delivers the notification when
// the inserting transaction commits, and a rolled-back one sends none; so
// a woken relay finds the rows. Writers are unchanged: [outbox.Outbox.Add]
// issues the same INSERT, and the trigger runs once per statement.
//
// A notification is a hint, never the only way rows are found: one sent
// while the listener reconnects is lost, so the relay still polls, and its
// PollInterval bounds how late that makes it.
//
// The package links pgx (github.com/jackc/pgx/v5) for the listening
// connection, which database/sql cannot hold; package outbox links no
// driver.
package pgwake

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemq/idemq/internal/sqldialect"
)

// Install creates (or replaces) the function and the trigger that notify
// table's channel after each INSERT into table. Run it once, as a
// migration, after the outbox's own: concurrent runs may fail.
func Install(ctx context.Context, db *sql.DB, table string) error {
	if !sqldialect.ValidTable(table) {
		return fmt.Errorf("pgwake: table name %q: want %s", table, sqldialect.TableRule)
	}
	// The table name is quoted as is (ValidTable); in pg_notify it is a
	// string literal, which ValidTable's characters need no escaping in.
	fn, tbl := `"`+table+`_wake"`, `"`+table+`"`
	stmts := []string{
		`CREATE OR REPLACE FUNCTION ` + fn + `() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('` + table + `', '');
	RETURN NULL;
END $$`,
		`CREATE OR REPLACE TRIGGER ` + fn + ` AFTER INSERT ON ` + tbl + ` FOR EACH STATEMENT EXECUTE FUNCTION ` + fn + `()`,
	}
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("pgwake: install on %s: %w", table, err)
		}
	}
	return nil
}

// reconnectPause is how long a Listener waits before it connects again
// after it lost its connection.
const reconnectPause = time.Second

// Listener listens on an outbox table's channel and signals C for each
// notification, from [Listen] until [Listener.Close].
type Listener struct {
	// C is the channel to give [outbox.RelayConfig].Wake, as a
	// time.Ticker's C. It holds at most one signal: notifications that
	// come while the relay is busy are one wake-up. One Listener wakes one
	// relay; give each relay its own.
	C <-chan struct{}

	dsn, table string
	c          chan struct{}
	cancel     context.CancelFunc
	done       chan struct{}
}

// Listen connects to dsn (a pgx connection string) and listens on the
// channel of table, on which [Install] put the trigger. ctx bounds the
// first connection only. A lost connection is made again, a second later,
// until Close; each new one signals C once, for the notifications missed
// meanwhile. The loss and the return are logged (slog's default logger,
// at WARN and INFO): the relay meanwhile finds rows only by polling.
func Listen(ctx context.Context, dsn, table string) (*Listener, error) {
	if !sqldialect.ValidTable(table) {
		return nil, fmt.Errorf("pgwake: table name %q: want %s", table, sqldialect.TableRule)
	}
	c := make(chan struct{}, 1)
	l := &Listener{C: c, dsn: dsn, table: table, c: c, done: make(chan struct{})}
	conn, err := l.connect(ctx)
	if err != nil {
		return nil, err
	}
	run, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	go l.run(run, conn)
	return l, nil
}

// Close stops listening and closes the connection.
func (l *Listener) Close() error {
	l.cancel()
	<-l.done
	return nil
}

func (l *Listener) connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, l.dsn)
	if err != nil {
		return nil, fmt.Errorf("pgwake: connect: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.table}.Sanitize()); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("pgwake: listen on %s: %w", l.table, err)
	}
	return conn, nil
}

func (l *Listener) run(ctx context.Context, conn *pgx.Conn) {
	defer close(l.done)
	for {
		for conn != nil {
			if _, err := conn.WaitForNotification(ctx); err != nil {
				if ctx.Err() == nil {
					slog.Warn("pgwake: lost the listening connection; relays find rows by polling until it is back", "table", l.table, "err", err)
				}
				conn.Close(context.Background())
				conn = nil
				break
			}
			l.wake()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(reconnectPause):
		}
		if c, err := l.connect(ctx); err == nil {
			slog.Info("pgwake: listening again", "table", l.table)
			conn = c
			l.wake()
		}
	}
}

func (l *Listener) wake() {
	select {
	case l.c <- struct{}{}:
	default:
	}
}
