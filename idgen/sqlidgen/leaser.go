package sqlidgen

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/internal/sqldialect"
)

// Defaults of [Config].
const (
	defaultTable = "idemq_worker_lease"
	defaultLease = 10 * time.Second
)

// maxSize is the largest [Config.Size] of a leased pool: 65536 node ids,
// Sonyflake's 16 node bits. A Leaser keeps a row for every node id of its
// pool, so that it finds the node to grant by one ordered index scan; for a
// larger id space use [WorkerNodes], which keeps a row per start instead.
const maxSize = 1 << 16

// Bounds on what a row holds.
const (
	maxPool  = 64  // bytes of a pool name
	maxOwner = 255 // bytes of an owner description, longer ones are cut
)

// cleanupTimeout bounds the statements that give back a node an Acquire
// took for a caller that has gone.
const cleanupTimeout = 5 * time.Second

// Config holds a Leaser's settings. Pool and Size are required.
type Config struct {
	// Pool names the pool: leasers with the same pool and table share its
	// node ids. At most 64 bytes of UTF-8, compared byte for byte.
	// Required.
	Pool string
	// Size is the number of node ids in the pool, 0 to Size-1, at most
	// 65536 (Sonyflake's 16 node bits: a Leaser keeps a row per node id;
	// for a larger id space use [WorkerNodes]). It must not exceed the node ids of the layout of every
	// generator using the pool (Acquire checks), and must never shrink
	// below a node some holder still uses. Required: there is no default
	// node range.
	Size int64
	// Lease is how long a lease lasts from the database's now when it is
	// granted or renewed. A holder that stalls for longer loses its node.
	// Default 10 seconds; at least a millisecond.
	Lease time.Duration
	// Table is the name of the table holding the pool's rows: a letter or
	// underscore, then letters, digits and underscores, at most 48 bytes
	// (an index named after it must fit every dialect's limit). It is
	// quoted, so PostgreSQL keeps its case. One table may hold many pools.
	// Default "idemq_worker_lease".
	Table string
}

func (c *Config) setDefaults() {
	if c.Lease == 0 {
		c.Lease = defaultLease
	}
	if c.Table == "" {
		c.Table = defaultTable
	}
}

// validate reports settings that cannot work, wrapping
// [idgen.ErrInvalidConfig].
func (c Config) validate() error {
	var why string
	switch {
	case c.Pool == "":
		why = "Pool is required"
	case len(c.Pool) > maxPool || !utf8.ValidString(c.Pool):
		why = fmt.Sprintf("Pool %q: want at most %d bytes of UTF-8", c.Pool, maxPool)
	case c.Size <= 0:
		why = fmt.Sprintf("Size %d: want the number of node ids in the pool, at least 1", c.Size)
	case c.Size > maxSize:
		why = fmt.Sprintf("Size %d: a leased pool holds at most %d node ids, a row each; for a larger id space use WorkerNodes, which keeps a row per start", c.Size, maxSize)
	case c.Lease < time.Millisecond:
		why = fmt.Sprintf("Lease %v: want at least 1ms", c.Lease)
	case !sqldialect.ValidTable(c.Table):
		why = fmt.Sprintf("Table %q: want %s", c.Table, sqldialect.TableRule)
	default:
		return nil
	}
	return fmt.Errorf("sqlidgen: config: %s: %w", why, idgen.ErrInvalidConfig)
}

// Leaser is an [idgen.Leaser] over rows of one SQL table, a row per node of
// the pool ([Config.Pool]; one table may hold many). It is safe for
// concurrent use by multiple goroutines and processes sharing the table.
//
// Every lease starts, ends and is compared by the database's clock, read
// once per statement, never by the calling process's, so holders on hosts
// with skewed clocks agree. Acquire takes the smallest node id never used;
// once every id has been, the node whose lease ended longest ago, a
// released lease ending when it was released: a freed node joins the tail
// of a queue and rests as long as the pool allows. A row's high-water mark
// (microseconds, rounded up, by the holders' clocks) only rises with
// renewals, and a release sets the holder's exact mark, never below the
// mark its lease was granted with.
//
// Acquire is one statement on PostgreSQL and SQLite and two on MySQL (its
// first call per Leaser also counts, and if need be fills in, the pool's
// rows); Renew and Release are one (Release two on MySQL). A call whose
// answer was lost does not hold a node for nothing: Acquire looks for a
// lease granted under its token and returns it, or releases it once its
// context has ended.
type Leaser struct {
	db  *sql.DB
	d   sqldialect.Dialect
	cfg Config
	q   leaseSQL
	// filled is set once this Leaser has seen a row for every node of
	// its pool, so that a take finds never-used nodes first.
	filled atomic.Bool
}

var _ idgen.Leaser = (*Leaser)(nil)

// New returns a Leaser of the pool cfg names over db, which speaks d (the
// dialect values of [github.com/idemq/idemq/dedupe/sqldedupe] and
// [github.com/idemq/idemq/outbox]: dialect.Postgres, ...). It does not
// touch the database: call [Leaser.Migrate] to create the table, or
// create it from [Leaser.Schema]. It never closes db.
func New(db *sql.DB, d dialect.Dialect, cfg Config) (*Leaser, error) {
	if err := checkDB(db, d); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Leaser{db: db, d: d, cfg: cfg, q: newLeaseSQL(d, cfg.Table)}, nil
}

// Schema returns the statements that create the table and its index, for
// migration tools that manage the schema themselves. A table made by an
// earlier version lacks the free_seq column, which orders releases within
// one tick of the database's clock; Migrate adds it, and so does
// ALTER TABLE <table> ADD COLUMN free_seq BIGINT NOT NULL DEFAULT 0
// (INTEGER on SQLite).
func (l *Leaser) Schema() []string { return slices.Clone(l.q.ddl) }

// Migrate creates the table and its index unless they exist, and adds the
// free_seq column to a table made by an earlier version.
func (l *Leaser) Migrate(ctx context.Context) error {
	// The table first, then the column, then the index on it:
	// PostgreSQL checks an index's columns before it finds that an index
	// of that name exists.
	if err := migrate(ctx, l.db, l.cfg.Table, l.q.ddl[:1]); err != nil {
		return err
	}
	has := func() (bool, error) {
		var n int
		err := l.db.QueryRowContext(ctx, l.q.hasSeq, l.cfg.Table).Scan(&n)
		return n > 0, err
	}
	ok, err := has()
	if err == nil && !ok {
		if _, err = l.db.ExecContext(ctx, l.q.addSeq); err != nil {
			// Another client may have added it meanwhile.
			if ok, _ = has(); ok {
				err = nil
			}
		}
	}
	if err != nil {
		return fail(ctx, "migrate "+l.cfg.Table+": add column free_seq", err)
	}
	return migrate(ctx, l.db, l.cfg.Table, l.q.ddl[1:])
}

// checkDB checks the two arguments every constructor takes.
func checkDB(db *sql.DB, d sqldialect.Dialect) error {
	if db == nil {
		return fmt.Errorf("sqlidgen: nil *sql.DB: %w", idgen.ErrInvalidConfig)
	}
	if !sqldialect.Valid(d) {
		return fmt.Errorf("sqlidgen: unknown dialect %v: %w", d, idgen.ErrInvalidConfig)
	}
	return nil
}

// migrate runs the DDL of table unless its objects exist.
func migrate(ctx context.Context, db *sql.DB, table string, ddl []string) error {
	for _, stmt := range ddl {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fail(ctx, "migrate "+table, err)
		}
	}
	return nil
}

// Acquire takes a node id of the pool, as [idgen.Leaser] says. A dynamic
// acquire takes the smallest never-used node id if there is one, else the
// node whose lease ended or was released longest ago; it tries again
// whenever another client took the node it chose, so it fails with
// [idgen.ErrNoFreeNode] only when no node was free. After an error that
// leaves the outcome unknown it looks for a node granted under this call's
// token, returning it while ctx lasts and giving it back when ctx has ended,
// so that a lost answer does not hold a node for a whole lease.
func (l *Leaser) Acquire(ctx context.Context, req idgen.LeaseRequest) (idgen.Lease, error) {
	if top := l.cfg.Size - 1; top > req.MaxNode {
		return idgen.Lease{}, fmt.Errorf("sqlidgen: pool %q has node ids 0 to %d, but the layout holds only up to %d: shrink Config.Size to at most %d (with no holder above it) or use a layout with more node bits: %w",
			l.cfg.Pool, top, req.MaxNode, req.MaxNode+1, idgen.ErrInvalidConfig)
	}
	if req.Static && (req.Node < 0 || req.Node >= l.cfg.Size) {
		return idgen.Lease{}, fmt.Errorf("sqlidgen: static node %d is outside pool %q of node ids 0 to %d: %w",
			req.Node, l.cfg.Pool, l.cfg.Size-1, idgen.ErrInvalidConfig)
	}
	token := rand.Text()
	owner := clip(req.Owner, maxOwner)
	var (
		lease idgen.Lease
		err   error
	)
	if req.Static {
		lease, err = l.acquireStatic(ctx, req.Node, token, owner)
	} else {
		lease, err = l.acquireAny(ctx, token, owner)
	}
	if err == nil || errors.Is(err, idgen.ErrNoFreeNode) {
		return lease, err
	}
	if lease, ok := l.settle(ctx, token); ok {
		return lease, nil
	}
	return idgen.Lease{}, fail(ctx, fmt.Sprintf("acquire a node of pool %q", l.cfg.Pool), err)
}

// acquireStatic takes node if no live lease holds it.
func (l *Leaser) acquireStatic(ctx context.Context, node int64, token, owner string) (idgen.Lease, error) {
	args := []any{l.cfg.Pool, node, token, owner, sqldialect.Micros(l.cfg.Lease)}
	var (
		mark int64
		ok   bool
	)
	if l.d == sqldialect.MySQL {
		if _, err := l.db.ExecContext(ctx, l.q.static, args...); err != nil {
			return idgen.Lease{}, err
		}
		err := l.db.QueryRowContext(ctx, l.q.took, token, l.cfg.Pool, node).Scan(&ok, &mark)
		if err != nil {
			return idgen.Lease{}, err
		}
	} else {
		switch err := l.db.QueryRowContext(ctx, l.q.static, args...).Scan(&mark); {
		case err == nil:
			ok = true
		case !errors.Is(err, sql.ErrNoRows):
			return idgen.Lease{}, err
		}
	}
	if !ok {
		return idgen.Lease{}, fmt.Errorf("sqlidgen: static node %d of pool %q is held by a live lease: %w", node, l.cfg.Pool, idgen.ErrNoFreeNode)
	}
	return l.lease(node, token, mark), nil
}

// acquireAny takes a never-used node, else the node free longest. The
// first call of a Leaser, and any call whose take finds no free node,
// probes the pool: when node ids lack a row — a new pool, one grown since,
// or rows deleted — it fills them in and takes again. A pass that does not
// end has filled rows in, or seen another client take the node it chose or
// hold a free node locked on its way to taking it, so the loop ends: the
// pool is finite and a node taken stays taken for a lease.
func (l *Leaser) acquireAny(ctx context.Context, token, owner string) (idgen.Lease, error) {
	pause := time.Millisecond
	for {
		tried := l.filled.Load()
		if tried {
			node, mark, ok, err := l.take(ctx, token, owner)
			if err != nil {
				return idgen.Lease{}, err
			}
			if ok {
				return l.lease(node, token, mark), nil
			}
		}
		var (
			free bool
			rows int64
		)
		err := l.db.QueryRowContext(ctx, l.q.probe, l.cfg.Pool, l.cfg.Size, l.cfg.Pool, l.cfg.Size).Scan(&free, &rows)
		if err != nil {
			return idgen.Lease{}, err
		}
		if rows < l.cfg.Size {
			if err := l.fill(ctx); err != nil {
				return idgen.Lease{}, err
			}
			l.filled.Store(true)
			continue
		}
		l.filled.Store(true)
		if !free {
			return idgen.Lease{}, fmt.Errorf("sqlidgen: all %d node ids of pool %q are held by live leases: %w", l.cfg.Size, l.cfg.Pool, idgen.ErrNoFreeNode)
		}
		// A node is free, yet the take found none: on PostgreSQL another
		// client may still be taking it, holding the row locked (FOR
		// UPDATE SKIP LOCKED passed over it): look again once it is
		// done. Elsewhere a node became free since the take.
		if tried && l.d == sqldialect.Postgres {
			if err := sleep(ctx, pause); err != nil {
				return idgen.Lease{}, err
			}
			pause = min(2*pause, 50*time.Millisecond)
		}
	}
}

// fill inserts a never-used row for every node of the pool that has no row.
func (l *Leaser) fill(ctx context.Context) error {
	args := []any{l.cfg.Pool, l.cfg.Size, l.cfg.Pool}
	if l.d == sqldialect.MySQL {
		args = []any{l.cfg.Pool, l.cfg.Size, l.cfg.Size, l.cfg.Size, l.cfg.Size}
	}
	_, err := l.db.ExecContext(ctx, l.q.fill, args...)
	return err
}

// take gives token the free node that has been free longest, if any.
func (l *Leaser) take(ctx context.Context, token, owner string) (node, mark int64, ok bool, err error) {
	if l.d != sqldialect.MySQL {
		err = l.db.QueryRowContext(ctx, l.q.take, token, owner, sqldialect.Micros(l.cfg.Lease), l.cfg.Pool, l.cfg.Pool, l.cfg.Size).Scan(&node, &mark)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, 0, false, nil
		}
		return node, mark, err == nil, err
	}
	// A grant that finds its node's token changed lost it to another
	// client: pick again. Each pass that does not end follows a grant.
	for {
		var old string
		err = l.db.QueryRowContext(ctx, l.q.pick, l.cfg.Pool, l.cfg.Size).Scan(&node, &mark, &old)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, 0, false, nil
		}
		if err != nil {
			return 0, 0, false, err
		}
		ok, err := affected(l.db.ExecContext(ctx, l.q.grant, token, owner, sqldialect.Micros(l.cfg.Lease), l.cfg.Pool, node, old))
		if err != nil || ok {
			return node, mark, ok, err
		}
	}
}

// settle looks for a live lease granted to token by a call whose answer was
// lost. While ctx lasts it returns the lease; once ctx has ended the caller
// has gone, so it releases the lease, on a context of its own.
func (l *Leaser) settle(ctx context.Context, token string) (idgen.Lease, bool) {
	live := ctx.Err() == nil
	if !live {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
	}
	var node, mark int64
	if err := l.db.QueryRowContext(ctx, l.q.byToken, l.cfg.Pool, token).Scan(&node, &mark); err != nil {
		return idgen.Lease{}, false
	}
	lease := l.lease(node, token, mark)
	if live {
		return lease, true
	}
	l.release(ctx, node, token, 0) // best effort: otherwise it ends with its lease
	return idgen.Lease{}, false
}

func (l *Leaser) lease(node int64, token string, mark int64) idgen.Lease {
	return idgen.Lease{Node: node, Token: token, TTL: l.cfg.Lease, HighWater: markTime(mark)}
}

// Renew extends lease by [Config.Lease] from the database's now and raises
// its node's high-water mark to highWater if it is below, as
// [idgen.Leaser] says. It fails with [idgen.ErrLeaseLost], changing
// nothing, if lease has ended by the database's clock or another holder has
// the node.
func (l *Leaser) Renew(ctx context.Context, lease idgen.Lease, highWater time.Time) (idgen.Lease, error) {
	args := []any{sqldialect.Micros(l.cfg.Lease), markMicros(highWater), l.cfg.Pool, lease.Node, lease.Token}
	var (
		mark int64
		ok   bool
	)
	if l.d == sqldialect.MySQL {
		res, err := l.db.ExecContext(ctx, l.q.renew, args...)
		if err == nil {
			var n int64
			if n, err = res.RowsAffected(); err == nil && n == 1 {
				mark, err = res.LastInsertId()
				ok = err == nil
			}
		}
		if err != nil {
			return idgen.Lease{}, l.failLease(ctx, "renew", lease, err)
		}
		if !ok {
			// MySQL counts a row the UPDATE left as it was (a renewal
			// within the microsecond of the last) as unchanged: the row
			// tells the outcome.
			err := l.db.QueryRowContext(ctx, l.q.owned, lease.Token, l.cfg.Pool, lease.Node).Scan(&ok, &mark)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return idgen.Lease{}, l.failLease(ctx, "renew", lease, err)
			}
		}
	} else {
		switch err := l.db.QueryRowContext(ctx, l.q.renew, args...).Scan(&mark); {
		case err == nil:
			ok = true
		case !errors.Is(err, sql.ErrNoRows):
			return idgen.Lease{}, l.failLease(ctx, "renew", lease, err)
		}
	}
	if !ok {
		return idgen.Lease{}, l.lost(lease)
	}
	return l.lease(lease.Node, lease.Token, mark), nil
}

// Release ends lease at once and sets its node's high-water mark to
// highWater, the holder's exact mark, which may lie below what its renewals
// reserved but never below the mark the lease was granted with (a zero
// highWater leaves that mark); the node joins the tail of the pool's free
// nodes. It fails with
// [idgen.ErrLeaseLost], changing nothing, if lease has ended by the
// database's clock, was released before, or another holder has the node.
func (l *Leaser) Release(ctx context.Context, lease idgen.Lease, highWater time.Time) error {
	ok, err := l.release(ctx, lease.Node, lease.Token, markMicros(highWater))
	if err != nil {
		return l.failLease(ctx, "release", lease, err)
	}
	if !ok {
		return l.lost(lease)
	}
	return nil
}

// release ends token's lease of node with mark (µs) and reports whether it
// was live.
func (l *Leaser) release(ctx context.Context, node int64, token string, mark int64) (bool, error) {
	if l.d != sqldialect.MySQL {
		return affected(l.db.ExecContext(ctx, l.q.release, mark, l.cfg.Pool, l.cfg.Pool, node, token))
	}
	var seq int64
	if err := l.db.QueryRowContext(ctx, l.q.nextSeq, l.cfg.Pool).Scan(&seq); err != nil {
		return false, err
	}
	return affected(l.db.ExecContext(ctx, l.q.release, mark, seq, l.cfg.Pool, node, token))
}

func (l *Leaser) lost(lease idgen.Lease) error {
	return fmt.Errorf("sqlidgen: node %d of pool %q: %w", lease.Node, l.cfg.Pool, idgen.ErrLeaseLost)
}

func (l *Leaser) failLease(ctx context.Context, op string, lease idgen.Lease, err error) error {
	return fail(ctx, fmt.Sprintf("%s node %d of pool %q", op, lease.Node, l.cfg.Pool), err)
}

// NodeLease is one node's row in a pool, as [Leaser.List] reports it. Its
// times are the database's.
type NodeLease struct {
	Node int64
	// Owner describes the holder of the last lease granted
	// ([idgen.LeaseRequest].Owner).
	Owner string
	// Held reports whether the lease is live by the database's clock.
	Held bool
	// Granted is when the last lease was granted, Expires when it ends or
	// ended. A released lease ended when it was released.
	Granted, Expires time.Time
	// Freed is when the last lease was released, or zero if it was not:
	// a lease neither held nor released expired.
	Freed time.Time
	// HighWater is the node's high-water mark: every ID issued with the
	// node lies before it. Zero if no holder has raised it.
	HighWater time.Time
	// Remaining is how long the lease has left, measured by the
	// database's clock at the time of the list; zero unless Held.
	Remaining time.Duration
}

// List returns the rows of the pool, in node order, for operators: the
// nodes that have ever been leased, whether held now or free. Node ids it
// does not list have never been used; rows at or above [Config.Size] are
// left from a larger pool and never granted again.
func (l *Leaser) List(ctx context.Context) ([]NodeLease, error) {
	rows, err := l.db.QueryContext(ctx, l.q.list, l.cfg.Pool)
	if err != nil {
		return nil, fail(ctx, fmt.Sprintf("list pool %q", l.cfg.Pool), err)
	}
	defer rows.Close()
	var out []NodeLease
	for rows.Next() {
		var (
			n                        NodeLease
			granted, expires, now, m int64
			freed                    sql.NullInt64
		)
		if err := rows.Scan(&n.Node, &n.Owner, &granted, &expires, &freed, &m, &now); err != nil {
			return nil, fail(ctx, fmt.Sprintf("list pool %q", l.cfg.Pool), err)
		}
		n.Granted, n.Expires = time.UnixMicro(granted).UTC(), time.UnixMicro(expires).UTC()
		if freed.Valid {
			n.Freed = time.UnixMicro(freed.Int64).UTC()
		}
		n.HighWater = markTime(m)
		if expires > now {
			n.Held, n.Remaining = true, time.Duration(expires-now)*time.Microsecond
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fail(ctx, fmt.Sprintf("list pool %q", l.cfg.Pool), err)
	}
	return out, nil
}

// affected reports whether a statement on one row changed it.
func affected(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// fail wraps a database error, adding ctx's error when a driver reported
// its cancellation in words of its own.
func fail(ctx context.Context, what string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("sqlidgen: %s: %w: %w", what, cerr, err)
	}
	return fmt.Errorf("sqlidgen: %s: %w", what, err)
}
