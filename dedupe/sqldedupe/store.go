package sqldedupe

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/internal/dedupekit"
	"github.com/idemq/idemq/internal/sqldialect"
)

// Config holds a Store's optional settings. The zero value works.
type Config struct {
	// Table is the name of the table holding the records: a letter or
	// underscore, then letters, digits and underscores, at most 48 bytes (an
	// index named after it must fit every dialect's limit). It is quoted, so
	// PostgreSQL keeps its case. Default "idemq_dedupe".
	Table string
	// CleanupInterval is how often a background goroutine deletes expired
	// records. Negative disables it; run [Store.Cleanup] yourself then.
	// Default one minute.
	CleanupInterval time.Duration
	// CleanupBatch is the most rows one cleanup statement deletes, which
	// bounds how long it holds locks. A cleanup round repeats the statement
	// while it deletes this many. Default 1000.
	CleanupBatch int
	// Logger receives the background cleanup's errors, which have no caller
	// to return to. Default slog.Default().
	Logger *slog.Logger
	// LockTimeout bounds how long [Store.ClaimTx] waits for a key that
	// another transaction holds, before it answers that the key is busy
	// (dedupe.ErrBusy): a duplicate delivered while the first runs
	// waits for its outcome that long, then the consumer asks again. It
	// applies to the claim alone, not to the rest of the transaction:
	// PostgreSQL's lock_timeout, restored within the statement, and
	// MariaDB's innodb_lock_wait_timeout, set for the statement, in whole
	// seconds. MySQL has no way to set it for one statement: there the wait
	// is the session's innodb_lock_wait_timeout (50 s unless the DSN sets
	// it, for example innodb_lock_wait_timeout=5 with
	// github.com/go-sql-driver/mysql). On SQLite, which locks the whole
	// database for one writer, the wait is the connection's busy timeout
	// (see the package documentation). Default 5s.
	LockTimeout time.Duration
}

func (c *Config) setDefaults() {
	if c.Table == "" {
		c.Table = dedupekit.DefaultTable
	}
	if c.CleanupInterval == 0 {
		c.CleanupInterval = time.Minute
	}
	if c.CleanupBatch == 0 {
		c.CleanupBatch = 1000
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.LockTimeout == 0 {
		c.LockTimeout = 5 * time.Second
	}
}

// validate reports settings that cannot work.
func (c Config) validate() error {
	switch {
	case !sqldialect.ValidTable(c.Table):
		return fmt.Errorf("sqldedupe: table name %q: want %s", c.Table, sqldialect.TableRule)
	case c.CleanupBatch <= 0:
		return fmt.Errorf("sqldedupe: cleanup batch %d must be positive", c.CleanupBatch)
	case c.LockTimeout < 0:
		return fmt.Errorf("sqldedupe: lock timeout %v must be positive", c.LockTimeout)
	}
	return nil
}

// maxRows is the most keys one statement carries; larger batches take one
// statement per maxRows keys. It keeps every dialect under its limit on bound
// parameters (SQLite's is the lowest) and bounds how many row locks one
// statement holds.
const maxRows = 256

// Record states, as stored.
const (
	stateProcessing = "processing"
	stateDone       = "done"
)

// Store is a [dedupe.Store] over one SQL table, and its [dedupe.TxClaimer]
// and [dedupe.Inspector]. It is
// safe for concurrent use by multiple goroutines and processes sharing the
// table.
//
// Every time a statement stores or compares is the database's own now
// (UTC_TIMESTAMP(6) on MySQL, statement_timestamp() on PostgreSQL,
// julianday('now') on SQLite), read once per statement; a
// [dedupe.ClaimResult]'s Until and Remaining come from that clock too. Times
// are microseconds (SQLite's clock ticks in milliseconds), and MySQL's are
// free of the session's time zone.
//
// Each call's statements are prepared once and reused; those inside a
// caller's transaction and those past the cache of prepared statements are
// sent as they are. A claim draws its tokens once, so a statement that runs
// twice (database/sql sends it again when the driver reports the connection
// bad) finds the records it wrote and answers Acquired with their tokens,
// never in flight to its own caller. A statement or transaction the database
// rolls back to break a deadlock (MySQL's error 1213, SQLSTATE class 40 on
// PostgreSQL) runs again, so that no call fails because other clients make
// progress; MySQL deadlocks under heavy churn, when several clients claim a
// key whose record a release has just deleted.
type Store struct {
	db    *sql.DB
	d     sqlDialect
	syn   sqldialect.Syntax
	cfg   Config
	stmts stmtCache
	// writing holds a token while one of the Store's own writes runs, on
	// SQLite only (see alone); nil elsewhere.
	writing chan struct{}

	closeOnce sync.Once
	cancel    context.CancelFunc // stops the cleanup goroutine; nil without one
	done      chan struct{}      // closed when the cleanup goroutine returns
}

var _ dedupe.Store = (*Store)(nil)

// New returns a Store over db, which speaks dialect. It does not touch the
// database: call [Store.Migrate] to create the table, or create it from
// [Store.Schema]. Unless cfg disables it, a goroutine deletes expired
// records until [Store.Close].
func New(db *sql.DB, kind dialect.Dialect, cfg Config) (*Store, error) {
	if db == nil {
		return nil, errors.New("sqldedupe: nil *sql.DB")
	}
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var d sqlDialect
	switch kind {
	case dialect.MySQL:
		d = newMySQL(cfg.Table, cfg.LockTimeout)
	case dialect.Postgres:
		d = newPostgres(cfg.Table, cfg.LockTimeout)
	case dialect.SQLite:
		d = newSQLite(cfg.Table)
	default:
		return nil, fmt.Errorf("sqldedupe: unknown dialect %v", kind)
	}
	s := &Store{db: db, d: d, syn: sqldialect.Of(kind), cfg: cfg, stmts: stmtCache{m: map[string]*cachedStmt{}}}
	if kind == dialect.SQLite {
		s.writing = make(chan struct{}, 1)
	}
	if cfg.CleanupInterval > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		s.cancel, s.done = cancel, make(chan struct{})
		go s.cleanupLoop(ctx)
	}
	return s, nil
}

// Schema returns the statements [Store.Migrate] runs: the table and its
// index, for migration tools that manage the schema themselves (the
// Schema example prints them for the default table).
func (s *Store) Schema() []string {
	return slices.Clone(s.d.schema())
}

// Migrate creates the table and its index unless they exist.
func (s *Store) Migrate(ctx context.Context) error {
	for _, stmt := range s.d.schema() {
		if _, err := s.db.ExecContext(ctx, stmt); err != nil {
			return fail(ctx, "migrate "+s.cfg.Table, err)
		}
	}
	return nil
}

// Close stops the background cleanup, waits for it to return and closes the
// Store's prepared statements. It never closes the *sql.DB. Calls made after
// Close still work, preparing their statements each time.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		if s.cancel != nil {
			s.cancel()
			<-s.done
		}
		err = s.stmts.close()
	})
	return err
}

// Claim implements [dedupe.Store]. Keys that are free, or whose records
// are done or in flight, take one statement per call; on MySQL a
// batch holding a key it did not acquire takes a second statement to read
// those keys' records. A batch of more than 256 keys, or with a key twice,
// takes several statements in one transaction, so that one failing part-way
// takes no key.
func (s *Store) Claim(ctx context.Context, reqs []dedupe.Item, lease time.Duration) ([]dedupe.ClaimResult, []error, error) {
	what := batchOf("claim", len(reqs), func() dedupe.Ref { return reqs[0].Ref })
	var err error
	if lease <= 0 {
		err = fmt.Errorf("lease %v must be positive", lease)
	}
	if err := start(ctx, err); err != nil {
		return nil, nil, fmt.Errorf("sqldedupe: %s: %w", what, err)
	}
	res := make([]dedupe.ClaimResult, len(reqs))
	errs := make([]error, len(reqs))
	var (
		rows []upsertRow
		idx  []int // idx[j] is the request rows[j] came from
	)
	for i, req := range reqs {
		if err := dedupekit.CheckClaim(req.Namespace, req.Group, req.Key, lease, req.Fingerprint); err != nil {
			errs[i] = fmt.Errorf("sqldedupe: claim %q: %w", req.Ref, err)
			continue
		}
		rows = append(rows, upsertRow{ref: req.Ref, fp: req.Fingerprint, lease: lease})
		idx = append(idx, i)
	}
	got, err := s.upsert(ctx, rows)
	if err != nil {
		return nil, nil, fail(ctx, what, err)
	}
	for j, i := range idx {
		res[i] = got[j]
	}
	return res, errs, nil
}

// Complete implements [dedupe.Store] with one statement per call (on
// PostgreSQL an INSERT ... ON CONFLICT DO UPDATE, which reaches the rows
// through the primary key whatever the planner's statistics say). On
// MySQL, a call in which some but not all tickets lost their lease takes a
// second statement to read their records and tell which.
func (s *Store) Complete(ctx context.Context, ts []dedupe.Ticket, retention time.Duration) ([]error, error) {
	return s.complete(ctx, runner{s: s}, batchOf("complete", len(ts), func() dedupe.Ref { return ts[0].Ref }), ts, retention)
}

// Release implements [dedupe.Store] with one statement per call; on
// MySQL, which cannot report which rows a DELETE removed, a call of more
// than one key takes a transaction of two statements. On PostgreSQL a
// released record stays as an expired row until a claim or the cleanup
// takes it.
func (s *Store) Release(ctx context.Context, ts []dedupe.Ticket) ([]error, error) {
	return s.release(ctx, batchOf("release", len(ts), func() dedupe.Ref { return ts[0].Ref }), ts)
}

// batchOf names a call of op on n items, the first of which is ref's, in
// errors.
func batchOf(op string, n int, ref func() dedupe.Ref) string {
	if n == 1 {
		return fmt.Sprintf("%s %q", op, ref())
	}
	return fmt.Sprintf("%s batch of %d", op, n)
}

// Extend implements [dedupe.Store].
func (s *Store) Extend(ctx context.Context, t dedupe.Ticket, lease time.Duration) error {
	what := fmt.Sprintf("extend %q", t.Ref)
	err := checkRef(t.Ref)
	if err == nil && lease <= 0 {
		err = fmt.Errorf("lease %v must be positive", lease)
	}
	if err := start(ctx, err); err != nil {
		return fmt.Errorf("sqldedupe: %s: %w", what, err)
	}
	r := runner{s: s}
	ok, err := alone(ctx, r, func() (bool, error) { return s.d.extend(ctx, r, t, lease) })
	switch {
	case err != nil:
		return fail(ctx, what, err)
	case !ok:
		return fmt.Errorf("sqldedupe: %s: %w", what, dedupe.ErrLeaseLost)
	}
	return nil
}

// Cleanup deletes at most [Config.CleanupBatch] records whose lease or
// retention has ended, in one statement (DELETE ... LIMIT on MySQL, a batch
// of ctids that skips locked rows on PostgreSQL), and reports how many it
// deleted. The background cleanup calls it; call it yourself when that is
// disabled.
func (s *Store) Cleanup(ctx context.Context) (int64, error) {
	n, err := func() (int64, error) {
		end, err := s.turn(ctx)
		if err != nil {
			return 0, err
		}
		defer end()
		return s.d.cleanup(ctx, runner{s: s}, s.cfg.CleanupBatch)
	}()
	if err != nil {
		return 0, fail(ctx, "cleanup "+s.cfg.Table, err)
	}
	return n, nil
}

// cleanupLoop runs a cleanup round every interval until ctx ends. A round
// repeats Cleanup while it deletes full batches, so a backlog drains in
// bounded statements instead of waiting an interval per batch.
func (s *Store) cleanupLoop(ctx context.Context) {
	defer close(s.done)
	tick := time.NewTicker(s.cfg.CleanupInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for {
			n, err := s.Cleanup(ctx)
			if err != nil {
				if ctx.Err() == nil {
					s.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "sqldedupe: background cleanup", slog.Any("err", err))
				}
				break
			}
			if n < int64(s.cfg.CleanupBatch) {
				break
			}
		}
	}
}

// upsertRow asks to claim one key for a lease. token is drawn once per call,
// so that a statement run again (after a lost answer or a deadlock) knows
// the record it wrote as its own.
type upsertRow struct {
	ref   dedupe.Ref
	fp    string
	lease time.Duration
	token string
}

// record is a key's row as the database answered it, with the database's now.
type record struct {
	state        string
	token        string
	fp           string
	expires, now int64 // µs since the Unix epoch, by the database's clock
}

// answer classifies rec, the record row's key held when the claim met it.
// Every dialect's upsert returns the record's fingerprint with it, so a
// conflict is decided here, for all three alike, by
// [dedupekit.FingerprintsConflict]. A record read after the statement that
// kept it (MySQL's second statement) may have ended since; the claim still
// met it live, so it answers with the shortest wait there is.
func answer(row upsertRow, rec record) dedupe.ClaimResult {
	if rec.token == row.token {
		return dedupe.ClaimResult{Outcome: dedupe.Acquired, Token: row.token}
	}
	if dedupekit.FingerprintsConflict(rec.fp, row.fp) {
		return dedupe.ClaimResult{Outcome: dedupe.Reused}
	}
	res := dedupe.ClaimResult{
		Outcome:   dedupe.Busy,
		Until:     time.UnixMicro(rec.expires),
		Remaining: time.Duration(max(rec.expires-rec.now, 1)) * time.Microsecond,
	}
	if rec.state == stateDone {
		res.Outcome = dedupe.Suppressed
	}
	return res
}

// upsert claims rows and answers each as if it had been asked alone, one
// after another in order: a key twice in rows is first acquired, then in
// flight.
//
// Rows that take more than one statement are claimed in one transaction, so
// that a batch failing part-way (its deadline, a lost connection) takes no
// key: its caller never learns the tokens, and the keys an earlier statement
// took would stay held for a whole lease.
//
// A call that ends with its context may still have been committed: the
// context can end while the database commits. The rows' tokens are then
// given back (released; a record that does not hold the token is left
// alone), so that the keys are free again at once rather than after a
// lease, as redisdedupe does.
func (s *Store) upsert(ctx context.Context, rows []upsertRow) ([]dedupe.ClaimResult, error) {
	for i := range rows {
		rows[i].token = rand.Text()
	}
	r := runner{s: s}
	res, err := alone(ctx, r, func() ([]dedupe.ClaimResult, error) {
		if oneStatement(rows) {
			return s.upsertRounds(ctx, r, rows)
		}
		var res []dedupe.ClaimResult
		err := r.inTx(ctx, func(r runner) (err error) {
			res, err = s.upsertRounds(ctx, r, rows)
			return err
		})
		return res, err
	})
	if err != nil && ctx.Err() != nil {
		ts := make([]dedupe.Ticket, len(rows))
		for i, row := range rows {
			ts[i] = dedupe.Ticket{Ref: row.ref, Token: row.token}
		}
		giveBack, cancel := context.WithTimeout(context.WithoutCancel(ctx), dedupekit.GiveBackTimeout)
		defer cancel()
		if _, uerr := s.release(giveBack, fmt.Sprintf("give back a claim of %d that ended with its context", len(ts)), ts); uerr != nil {
			err = errors.Join(err, uerr)
		}
	}
	return res, err
}

// alone runs do, the Store's own work, in the Store's turn to write (see
// turn), and again while the database rolls it back to break a deadlock
// ([sqldialect.Retry]), so that no call fails because other clients make
// progress. Inside a caller's transaction do runs as it is: the caller's
// transaction holds the database, and a rollback took the caller's work
// too, so the error is the caller's to handle.
func alone[T any](ctx context.Context, r runner, do func() (T, error)) (T, error) {
	if r.tx != nil {
		return do()
	}
	return sqldialect.Retry(ctx, func() (T, error) {
		end, err := r.s.turn(ctx)
		if err != nil {
			var zero T
			return zero, err
		}
		defer end()
		return do()
	})
}

// turn waits, on SQLite, until no other write of this Store runs, and
// returns the function that ends this one's turn; elsewhere it returns at
// once. SQLite has one writer at a time, and a connection that finds the
// write lock taken polls for it with the busy handler's sleeps, which grow
// to 100 ms: against six writers that claimed and completed without a
// pause, an extension waited up to 2 s, losing a 300 ms lease, while the
// others took the lock between its polls. Waiters here queue in order
// (a channel's senders are served first come, first served) and are woken
// as the turn ends, so that the wait is the writes ahead of them, with the
// WAL checkpoint that one of them may run before it returns. The wait ends
// with ctx.
func (s *Store) turn(ctx context.Context) (end func(), err error) {
	if s.writing == nil {
		return func() {}, nil
	}
	select {
	case s.writing <- struct{}{}:
		return func() { <-s.writing }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// oneStatement reports whether rows fit one upsert: few enough, and no key
// twice.
func oneStatement(rows []upsertRow) bool {
	if len(rows) > maxRows {
		return false
	}
	seen := make(map[dedupe.Ref]bool, len(rows))
	for _, row := range rows {
		if seen[row.ref] {
			return false
		}
		seen[row.ref] = true
	}
	return true
}

// upsertRounds is upsert inside r. Each round asks the first pending
// occurrence of every key, sorted so that concurrent batches lock rows in
// one order and cannot deadlock each other.
func (s *Store) upsertRounds(ctx context.Context, r runner, rows []upsertRow) ([]dedupe.ClaimResult, error) {
	res := make([]dedupe.ClaimResult, len(rows))
	pending := make([]int, len(rows))
	for i := range pending {
		pending[i] = i
	}
	for len(pending) > 0 {
		round, later := firstOfEach(pending, func(i int) dedupe.Ref { return rows[i].ref })
		slices.SortFunc(round, func(a, b int) int { return compareRefs(rows[a].ref, rows[b].ref) })
		for chunk := range slices.Chunk(round, maxRows) {
			batch := make([]upsertRow, len(chunk))
			for j, i := range chunk {
				batch[j] = rows[i]
			}
			recs, err := s.d.upsert(ctx, r, batch)
			if err != nil {
				return nil, err
			}
			for _, i := range chunk {
				rec, ok := recs[rows[i].ref]
				if !ok {
					return nil, fmt.Errorf("the database answered no record for %q", rows[i].ref)
				}
				res[i] = answer(rows[i], rec)
			}
		}
		pending = later
	}
	return res, nil
}

// complete marks ts done for retention inside r, one statement per round of
// distinct keys. Per-ticket errors are msgkey.ErrInvalid and ErrLeaseLost.
func (s *Store) complete(ctx context.Context, r runner, what string, ts []dedupe.Ticket, retention time.Duration) ([]error, error) {
	var err error
	if retention <= 0 {
		err = fmt.Errorf("retention %v must be positive", retention)
	}
	if err := start(ctx, err); err != nil {
		return nil, fmt.Errorf("sqldedupe: %s: %w", what, err)
	}
	return s.perTicket(ctx, "complete", what, ts, func(batch []dedupe.Ticket) (map[dedupe.Ref]bool, error) {
		return alone(ctx, r, func() (map[dedupe.Ref]bool, error) { return s.d.complete(ctx, r, batch, retention) })
	})
}

func (s *Store) release(ctx context.Context, what string, ts []dedupe.Ticket) ([]error, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sqldedupe: %s: %w", what, err)
	}
	r := runner{s: s}
	return s.perTicket(ctx, "release", what, ts, func(batch []dedupe.Ticket) (map[dedupe.Ref]bool, error) {
		return alone(ctx, r, func() (map[dedupe.Ref]bool, error) { return s.d.release(ctx, r, batch) })
	})
}

// perTicket validates ts and passes the valid ones to do in rounds of
// distinct keys, so that each statement touches a row once and a ticket twice
// in ts is answered as two calls one after the other would be. do reports
// the keys whose tickets owned their records; the others lost their lease.
func (s *Store) perTicket(ctx context.Context, op, what string, ts []dedupe.Ticket, do func([]dedupe.Ticket) (map[dedupe.Ref]bool, error)) ([]error, error) {
	errs := make([]error, len(ts))
	var pending []int
	for i, t := range ts {
		if err := checkRef(t.Ref); err != nil {
			errs[i] = fmt.Errorf("sqldedupe: %s %q: %w", op, t.Ref, err)
			continue
		}
		pending = append(pending, i)
	}
	for len(pending) > 0 {
		round, later := firstOfEach(pending, func(i int) dedupe.Ref { return ts[i].Ref })
		slices.SortFunc(round, func(a, b int) int { return compareRefs(ts[a].Ref, ts[b].Ref) })
		for chunk := range slices.Chunk(round, maxRows) {
			batch := make([]dedupe.Ticket, len(chunk))
			for j, i := range chunk {
				batch[j] = ts[i]
			}
			owned, err := do(batch)
			if err != nil {
				return nil, fail(ctx, what, err)
			}
			for _, i := range chunk {
				if !owned[ts[i].Ref] {
					errs[i] = fmt.Errorf("sqldedupe: %s %q: %w", op, ts[i].Ref, dedupe.ErrLeaseLost)
				}
			}
		}
		pending = later
	}
	return errs, nil
}

// firstOfEach splits pending, in order, into the first index of each key and
// the rest.
func firstOfEach[K comparable](pending []int, key func(int) K) (first, rest []int) {
	seen := make(map[K]bool, len(pending))
	for _, i := range pending {
		if k := key(i); seen[k] {
			rest = append(rest, i)
		} else {
			seen[k] = true
			first = append(first, i)
		}
	}
	return first, rest
}

// compareRefs orders refs bytewise, as the key columns sort in every dialect.
func compareRefs(a, b dedupe.Ref) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	if c := strings.Compare(a.Group, b.Group); c != 0 {
		return c
	}
	return strings.Compare(a.Key, b.Key)
}

// checkRef reports whether ref can be stored.
func checkRef(ref dedupe.Ref) error {
	return dedupekit.CheckRef(ref.Namespace, ref.Group, ref.Key)
}

// one turns a batch answer of one item into a single call's error.
func one(errs []error, err error) error {
	if err != nil {
		return err
	}
	return errs[0]
}

// start returns ctx's error if it is done, else err: a call whose context
// ended before it began changes nothing.
func start(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return err
}

// fail wraps the error of a call that reached the database. Drivers report a
// context that ended mid-call in their own words ("invalid connection",
// "driver: bad connection"); fail puts ctx's error in the chain so callers
// can tell with errors.Is.
func fail(ctx context.Context, what string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("sqldedupe: %s: %w: %w", what, cerr, err)
	}
	return fmt.Errorf("sqldedupe: %s: %w", what, err)
}
