package outbox

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemq/idemq/internal/sqldialect"
)

// Sender ships messages to RocketMQ; remoting.OutboxSender and
// grpcv5.OutboxSender implement it over each client's producer. It must
// be safe for concurrent use: a relay ships the rows of different ordering
// keys at once.
type Sender interface {
	// Send ships m and returns once the broker has stored it. m carries its
	// key in [msgkey.Property] and among its Keys, and no Delay (the relay
	// waited it out). An error wrapping [ErrRefused] says the broker will
	// never take m, and the relay parks the row; any other error is retried
	// after a backoff. ctx ends when the relay's lease on the row nears its
	// end or the relay stops draining; Send must return by then.
	Send(ctx context.Context, m *Message) error
}

// BatchSender is a [Sender] that also ships several messages in one call,
// which a relay uses when its Sender has it: a broker stores a batch in one
// write, so that a relay ships many times the rows a second of one send a
// row.
type BatchSender interface {
	Sender
	// SendBatch ships msgs, two or more, and returns once the broker has
	// stored them all. The relay hands it messages of one topic, none
	// delayed, and either all without an ordering key or all of one, in
	// the order they must arrive; SendBatch puts them in one queue (the
	// ordering key's), in that order, and the broker stores all of them
	// or none. Each carries its own key, as in Send.
	//
	// Errors mean what they mean for Send, for the batch as a whole: an
	// error wrapping [ErrRefused] says the broker will never take the
	// batch, and the relay sends its messages one by one to find the one
	// to park; any other error, the batch is retried after a backoff (a
	// broker that stored it before failing to answer gets it again, with
	// the same keys). ctx is as for Send.
	SendBatch(ctx context.Context, msgs []*Message) error
}

// ErrRefused marks a [Sender]'s error for a message the broker refuses for
// good (too large, illegal): the relay parks its row instead of retrying.
var ErrRefused = errors.New("outbox: refused by the broker")

// RelayConfig holds a Relay's optional settings. The zero value works.
type RelayConfig struct {
	// Batch is the most rows one claim takes, up to 1024. Claims run one
	// at a time per table, so a relay ships at most about Batch rows per
	// claim's round trips: raise it for throughput. Default 100.
	Batch int
	// Concurrency is how many ordering keys a relay ships at once (rows
	// without an ordering key are one key each). Default 16.
	Concurrency int
	// PollInterval is how long an idle relay waits before it looks for rows
	// again. Default 20 ms.
	PollInterval time.Duration
	// Lease is how long a claim holds its rows: no other relay takes them
	// before it ends. A relay sends nothing of a claim past four fifths of
	// it (by its own monotonic clock, from before the claim), so a relay
	// that stalls longer than the lease may ship a row again, with the same
	// key, but never at the same time as another. A relay stopped inside
	// a claim holds up the other relays for a fifth of it, at least 1 s
	// (MySQL and PostgreSQL). Default 30 s.
	Lease time.Duration
	// MinBackoff and MaxBackoff bound the wait before a failed row is sent
	// again: it doubles from MinBackoff with each failed attempt, up to
	// MaxBackoff. The failed row holds back the later rows of its ordering
	// key meanwhile. Defaults 100 ms and 1 min.
	MinBackoff, MaxBackoff time.Duration
	// MaxAttempts parks a row after that many failed sends. Default 0:
	// only a refusal ([ErrRefused]) parks a row, and other failures (a
	// broker that is down) are retried for as long as they last.
	MaxAttempts int
	// Delete deletes shipped rows instead of marking them sent.
	Delete bool
	// Retention is how long rows marked sent stay in the table, for
	// operators, before the cleanup deletes them. Default 24 h.
	Retention time.Duration
	// CleanupInterval is how often the relay deletes sent rows past their
	// retention. Negative disables it. Default one minute.
	CleanupInterval time.Duration
	// DrainTimeout bounds Close: the rows a relay has claimed are shipped
	// until then, and the rest handed back unsent. Default 10 s.
	DrainTimeout time.Duration
	// Logger receives the errors the relay meets, which have no caller to
	// return to. Default slog.Default().
	Logger *slog.Logger
	// Wake, when set, tells the relay that rows were committed: a waiting
	// relay looks for rows at once instead of when its PollInterval (or
	// backoff) ends, which then only bounds how late a lost wake-up makes
	// it. Package outbox/pgwake wakes relays by PostgreSQL's
	// LISTEN/NOTIFY.
	Wake <-chan struct{}
}

// maxClaim is the most rows one claim takes: its statements bind one
// parameter a row, far under the databases' limits (SQLite's 32,766).
const maxClaim = 1024

func (c *RelayConfig) setDefaults() {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if c.Batch == 0 {
		c.Batch = 100
	}
	if c.Concurrency == 0 {
		c.Concurrency = 16
	}
	def(&c.PollInterval, 20*time.Millisecond)
	def(&c.Lease, 30*time.Second)
	def(&c.MinBackoff, 100*time.Millisecond)
	def(&c.MaxBackoff, time.Minute)
	def(&c.Retention, 24*time.Hour)
	def(&c.CleanupInterval, time.Minute)
	def(&c.DrainTimeout, 10*time.Second)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports settings that cannot work.
func (c RelayConfig) Validate() error {
	switch {
	case c.Batch <= 0 || c.Batch > maxClaim:
		return fmt.Errorf("outbox: batch %d: want 1 to %d", c.Batch, maxClaim)
	case c.Concurrency <= 0:
		return fmt.Errorf("outbox: concurrency %d must be positive", c.Concurrency)
	case c.PollInterval <= 0 || c.Lease <= 0 || c.DrainTimeout <= 0 || c.Retention <= 0:
		return errors.New("outbox: poll interval, lease, drain timeout and retention must be positive")
	case c.MinBackoff <= 0 || c.MaxBackoff < c.MinBackoff:
		return fmt.Errorf("outbox: backoff %v to %v: want 0 < min <= max", c.MinBackoff, c.MaxBackoff)
	case c.MaxAttempts < 0:
		return fmt.Errorf("outbox: max attempts %d must not be negative", c.MaxAttempts)
	}
	return nil
}

// Stats is a snapshot of what a relay did since it started
// ([Relay.Stats]); what the table holds is [Outbox.Count].
type Stats struct {
	Shipped int64 // rows shipped and marked sent (or deleted)
	Retried int64 // failed sends, each put back for a backoff
	Parked  int64 // rows parked: refused by the broker, or out of attempts
	// LeaseLost counts rows shipped after another relay could have taken
	// them (the lease ended before they were marked): they may ship twice,
	// with the same key.
	LeaseLost int64
}

// Relay ships an outbox's rows to RocketMQ through a [Sender], from
// [NewRelay] until [Relay.Close]. Several relays, in one process or many,
// share one table: each row is claimed by one relay at a time, under a
// lease, and rows with the same ordering key ship in order.
type Relay struct {
	o   *Outbox
	s   Sender
	bs  BatchSender // s, when it ships batches; else nil
	cfg RelayConfig

	sem      chan struct{}   // a slot per send under way, Concurrency in all
	stop     chan struct{}   // closed by Close: claim nothing more
	hard     context.Context // ends when draining ends
	hardStop context.CancelFunc
	done     chan struct{}
	once     sync.Once
	// recorded is signalled when a claim's rows are recorded: a relay
	// whose claim found no row (the keys' earlier rows in the other claim
	// under way) looks again then, not a poll interval later.
	recorded chan struct{}

	shipped, retried, parked, leaseLost atomic.Int64
}

// NewRelay starts a relay that ships o's rows through s until Close.
func NewRelay(o *Outbox, s Sender, cfg RelayConfig) (*Relay, error) {
	switch {
	case o == nil:
		return nil, errors.New("outbox: nil *Outbox")
	case s == nil:
		return nil, errors.New("outbox: nil Sender")
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Relay{o: o, s: s, cfg: cfg, sem: make(chan struct{}, cfg.Concurrency), stop: make(chan struct{}), done: make(chan struct{}), recorded: make(chan struct{}, 1)}
	r.bs, _ = s.(BatchSender)
	r.hard, r.hardStop = context.WithCancel(context.Background())
	go r.run()
	return r, nil
}

// Stats returns what r did so far.
func (r *Relay) Stats() Stats {
	return Stats{Shipped: r.shipped.Load(), Retried: r.retried.Load(), Parked: r.parked.Load(), LeaseLost: r.leaseLost.Load()}
}

// Close stops claiming rows, ships those already claimed for up to
// [RelayConfig.DrainTimeout], hands back the rest unsent, and returns when
// the relay has stopped. Calling it again does nothing.
func (r *Relay) Close() error {
	r.once.Do(func() {
		close(r.stop)
		t := time.AfterFunc(r.cfg.DrainTimeout, r.hardStop)
		<-r.done
		t.Stop()
		r.hardStop()
	})
	return nil
}

// pipeline is how many claims a relay ships at once: the next claim runs
// while the last one ships, so that the broker never waits for the table.
// A claim takes no row of a key whose earlier rows another claim holds, so
// order per key holds across them.
const pipeline = 2

func (r *Relay) run() {
	var rounds sync.WaitGroup
	defer close(r.done)
	defer rounds.Wait()
	wait := r.cfg.PollInterval
	nextCleanup := time.Now()
	inFlight := make(chan struct{}, pipeline)
	for {
		select {
		case <-r.stop:
			return
		case inFlight <- struct{}{}:
		}
		n, err := r.round(&rounds, func() { <-inFlight })
		switch {
		case err != nil:
			r.cfg.Logger.Error("outbox relay", "table", r.o.cfg.Table, "err", err)
			wait = min(max(2*wait, r.cfg.MinBackoff), r.cfg.MaxBackoff)
		case n == r.cfg.Batch:
			wait = 0 // more rows are waiting
		default:
			wait = r.cfg.PollInterval
		}
		select {
		case <-r.stop:
			return
		default:
		}
		if r.cfg.CleanupInterval > 0 && !r.cfg.Delete && time.Now().After(nextCleanup) {
			if _, err := r.o.cleanup(r.hard, r.cfg.Retention); err != nil {
				r.cfg.Logger.Error("outbox cleanup", "table", r.o.cfg.Table, "err", err)
			}
			nextCleanup = time.Now().Add(r.cfg.CleanupInterval)
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-r.stop:
				t.Stop()
				return
			case <-r.cfg.Wake: // a nil Wake never is
				t.Stop()
			case <-r.recorded:
				t.Stop()
			case <-t.C:
			}
		}
	}
}

// outcome collects what the shipping of one claim did to its rows.
type outcome struct {
	mu      sync.Mutex
	sent    []int64
	release []int64
}

func (c *outcome) add(to *[]int64, rows []row) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range rows {
		*to = append(*to, r.id)
	}
}

// round claims a batch and returns how many rows it claimed; a goroutine
// counted in rounds ships them, records what happened and then calls done.
// Without rows, done is called at once.
func (r *Relay) round(rounds *sync.WaitGroup, done func()) (int, error) {
	owner := token()
	start := time.Now()
	// A claim the database rolled back to break a deadlock with another
	// relay's marks runs again rather than waiting out a backoff.
	rows, err := sqldialect.Retry(r.hard, func() ([]row, error) {
		return r.o.q.claimRows(r.hard, r.o.db, owner, r.cfg.Lease, r.cfg.Batch)
	})
	if err != nil || len(rows) == 0 {
		done()
		return 0, err
	}
	rounds.Add(1)
	go func() {
		defer rounds.Done()
		defer done()
		// The lease started after start by the database's clock; stopping
		// at four fifths of it leaves the rest for the last send and the
		// marks.
		ctx, cancel := context.WithDeadline(r.hard, start.Add(r.cfg.Lease*4/5))
		defer cancel()
		var (
			out outcome
			wg  sync.WaitGroup
		)
		for _, g := range groups(rows, r.bs != nil) {
			r.sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-r.sem; wg.Done() }()
				r.ship(ctx, owner, g, r.bs != nil, &out)
			}()
		}
		wg.Wait()
		if err := r.finish(owner, rows, &out); err != nil {
			r.cfg.Logger.Error("outbox relay", "table", r.o.cfg.Table, "err", err)
		}
		select {
		case r.recorded <- struct{}{}:
		default:
		}
	}()
	return len(rows), nil
}

// Bounds on a batch a relay hands to [BatchSender.SendBatch]: with rows of
// 200 bytes, 64 make sends of about 20 KiB, and a claim of 256 rows of one
// topic keeps four of them under way at once. The size, as estimated by
// wireSize, stays a quarter of the broker's default maxMessageSize (4 MiB),
// which bounds a batch's whole body, properties and all.
const (
	maxBatchRows  = 64
	maxBatchBytes = 1 << 20
)

// groups splits rows, sorted by id, into the runs that each ship in order,
// one run after another: one per ordering key, and one per row without one.
// With batch, the rows without an ordering key go by topic instead, cut
// into runs of one batch each (batchLen); a key's run is cut into batches
// as it ships.
func groups(rows []row, batch bool) [][]row {
	var (
		gs [][]row
		at = map[string]int{} // ordering key, or topic of rows without one
	)
	for _, r := range rows {
		k := "k" + r.msg.OrderingKey
		if r.msg.OrderingKey == "" {
			if !batch {
				gs = append(gs, []row{r})
				continue
			}
			k = "t" + r.msg.Topic
		}
		i, ok := at[k]
		if !ok {
			i = len(gs)
			at[k] = i
			gs = append(gs, nil)
		}
		gs[i] = append(gs[i], r)
	}
	if !batch {
		return gs
	}
	var cut [][]row
	for _, g := range gs {
		for n := batchLen(g); g[0].msg.OrderingKey == "" && n < len(g); n = batchLen(g) {
			cut, g = append(cut, g[:n]), g[n:]
		}
		cut = append(cut, g)
	}
	return cut
}

// batchLen is how many of g's first rows go in one batch: at least one, at
// most maxBatchRows, of one topic, of at most maxBatchBytes together. A row
// too large to share a batch goes alone, and so does a row that failed
// before: a failed batch charges an attempt to each of its rows (or, for an
// ordering key, to its first), and sent alone they are charged for their
// own failures only, so that MaxAttempts parks the row that fails.
func batchLen(g []row) int {
	if g[0].attempts > 0 {
		return 1
	}
	size := 0
	for i := range g {
		size += wireSize(&g[i].msg)
		if i == maxBatchRows || i > 0 && (size > maxBatchBytes || g[i].msg.Topic != g[0].msg.Topic || g[i].attempts > 0) {
			return i
		}
	}
	return len(g)
}

// wireSize bounds what m adds to a batch on the wire: its body, properties,
// keys and tags, and the fixed fields and separators around them.
func wireSize(m *Message) int {
	n := 64 + len(m.Body) + len(m.Tags) + len(m.OrderingKey)
	for _, k := range m.Keys {
		n += 1 + len(k)
	}
	for name, v := range m.Properties {
		n += 2 + len(name) + len(v)
	}
	return n
}

// ship sends g's rows in order, in batches when r has a BatchSender (the
// rows of a run without an ordering key are one batch already). A row that
// fails is put back for a backoff; in a run of one ordering key the rows
// after it are handed back, as they wait for it. It reports whether it got
// through g: false when it handed back the rest.
func (r *Relay) ship(ctx context.Context, owner string, g []row, batch bool, out *outcome) bool {
	ordered := g[0].msg.OrderingKey != ""
	for len(g) > 0 {
		if ctx.Err() != nil {
			out.add(&out.release, g)
			return false
		}
		n := 1
		if batch {
			n = batchLen(g)
		}
		b := g[:n]
		err := r.send(ctx, b)
		switch {
		case err == nil:
			out.add(&out.sent, b)
		case ctx.Err() != nil:
			// Lease or drain over: whether the broker stored it is unknown;
			// it ships again later, with the same key.
			out.add(&out.release, g)
			return false
		case n > 1 && errors.Is(err, ErrRefused):
			// One row, or their sum, is refused: row by row, only a row
			// the broker refuses alone parks.
			if !r.ship(ctx, owner, b, false, out) {
				out.add(&out.release, g[n:])
				return false
			}
		case !ordered:
			// Rows without an ordering key fail each on its own.
			for i := range b {
				r.fail(owner, &b[i], err)
			}
		default:
			// The batch failed as its first row would have alone.
			if !r.fail(owner, &b[0], err) {
				out.add(&out.release, g[1:])
				return false
			}
			n = 1 // the rest of the batch goes again, after the parked row
		}
		g = g[n:]
	}
	return true
}

// send ships b's messages: one by Send, more by SendBatch.
func (r *Relay) send(ctx context.Context, b []row) error {
	if len(b) == 1 {
		return r.s.Send(ctx, &b[0].msg)
	}
	msgs := make([]*Message, len(b))
	for i := range b {
		msgs[i] = &b[i].msg
	}
	return r.bs.SendBatch(ctx, msgs)
}

// fail records err, a failed send of row: the row is parked if the broker
// refused it or it is out of attempts, and reported true; else it is put
// back for a backoff.
func (r *Relay) fail(owner string, row *row, err error) (parked bool) {
	if errors.Is(err, ErrRefused) || r.cfg.MaxAttempts > 0 && row.attempts+1 >= r.cfg.MaxAttempts {
		r.mark(r.o.q.park(), "park", reason(err), owner, row.id)
		r.parked.Add(1)
		r.cfg.Logger.Warn("outbox: row parked", "table", r.o.cfg.Table, "id", row.id, "key", row.msg.key(), "err", err)
		return true
	}
	r.mark(r.o.q.retry(), "retry", micros(r.backoff(row.attempts)), reason(err), owner, row.id)
	r.retried.Add(1)
	return false
}

// backoff is the wait after a row's attempts+1st failure.
func (r *Relay) backoff(attempts int) time.Duration {
	d := r.cfg.MinBackoff
	for range min(attempts, 40) {
		if d >= r.cfg.MaxBackoff {
			break
		}
		d *= 2
	}
	return min(d, r.cfg.MaxBackoff)
}

// reason is an error as a row keeps it: bounded.
func reason(err error) string {
	s := err.Error()
	if len(s) > 1000 {
		s = s[:1000]
	}
	return s
}

// dbTimeout bounds each statement that records an outcome; they run even
// while the relay stops, so that shipped rows are marked.
const dbTimeout = 10 * time.Second

// mark runs a statement on one row of a claim, logging its failure: the row
// stays leased then, and ships again when the lease ends.
func (r *Relay) mark(query, what string, args ...any) {
	ctx, cancel := context.WithTimeout(context.Background(), dbTimeout)
	defer cancel()
	if _, err := r.exec(ctx, query, args...); err != nil {
		r.cfg.Logger.Error("outbox relay: "+what, "table", r.o.cfg.Table, "err", err)
	}
}

// exec runs a statement that records an outcome, again while the database
// rolls it back to break a deadlock: on MySQL, two relays' (or one relay's
// two claims') marks of different rows deadlock now and then, and a mark
// lost so would leave its rows leased, to ship again when the lease ends.
func (r *Relay) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return sqldialect.Retry(ctx, func() (sql.Result, error) { return r.o.db.ExecContext(ctx, query, args...) })
}

// finish marks the shipped rows of a claim (sorted by id) sent, or deletes
// them, and hands back the rows not tried.
func (r *Relay) finish(owner string, claim []row, out *outcome) error {
	ctx, cancel := context.WithTimeout(context.Background(), dbTimeout)
	defer cancel()
	var errs []error
	if n := len(out.sent); n > 0 {
		runs := runsOf(claim, out.sent)
		q := r.o.q.sent(len(runs))
		if r.cfg.Delete {
			q = r.o.q.remove(len(runs))
		}
		res, err := r.exec(ctx, q, r.o.q.changeArgs(runs, n, owner)...)
		if err == nil {
			var k int64
			if k, err = res.RowsAffected(); err == nil {
				r.shipped.Add(k)
				r.leaseLost.Add(int64(n) - k)
			}
		}
		errs = append(errs, err)
	}
	if len(out.release) > 0 {
		runs := runsOf(claim, out.release)
		_, err := r.exec(ctx, r.o.q.release(len(runs)), r.o.q.changeArgs(runs, len(out.release), owner)...)
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("outbox: record shipment: %w", err)
	}
	return nil
}

// runsOf returns ids, some of a claim's rows (sorted by id), as the spans
// of the runs of the claim's rows they hold: a span holds no other row of
// the claim, and the owner leaves out every row that is not the claim's.
func runsOf(claim []row, ids []int64) []span {
	in := make(map[int64]bool, len(ids))
	for _, id := range ids {
		in[id] = true
	}
	var (
		runs spanList
		next bool
	)
	for _, r := range claim {
		if in[r.id] {
			runs.add(r.id, next)
		}
		next = in[r.id]
	}
	return runs
}

// token returns a fresh owner token: 128 random bits in 32 hex digits, the
// width of the owner column on MySQL.
func token() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}
