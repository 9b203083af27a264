package redisidgen

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/internal/rediskey"
)

// Errors of pool administration; the lease calls return the sentinels of
// package idgen. Test with errors.Is.
var ErrPoolExists = errors.New("redisidgen: pool exists")

// maxSize is the largest pool: the scripts count node ids in Lua numbers,
// which hold integers exactly up to 2^53. No layout with a useful time
// field has more node ids.
const maxSize = 1 << 53

// Config sets up a Leaser. Pool and Size are required; every leaser of one
// pool must be given the same Size and Lease.
type Config struct {
	// Pool names the pool that the processes sharing node ids use.
	// Required.
	Pool string
	// Size is the number of node ids, 0 to Size-1, usually the layout's
	// MaxNode()+1; at most 2^53. There is no default: a pool larger
	// than a process's layout is refused by Acquire.
	Size int64
	// Lease is how long a lease lasts without renewal, by the Redis
	// server's clock, and how long a pool that lost its records grants
	// nothing. Whole milliseconds, at least 10ms. Default 10s.
	Lease time.Duration
	// Namespace opens every key's hash tag, so that the pools of several
	// applications stand apart in a shared Redis. Default "idemq".
	Namespace string
}

// minLease keeps the lease above the resolution of the scripts' clock.
const minLease = 10 * time.Millisecond

func (c *Config) setDefaults() {
	if c.Lease == 0 {
		c.Lease = 10 * time.Second
	}
	if c.Namespace == "" {
		c.Namespace = "idemq"
	}
}

// validate reports settings that cannot work. Errors wrap
// [idgen.ErrInvalidConfig].
func (c Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("redisidgen: %s: %w", fmt.Sprintf(format, args...), idgen.ErrInvalidConfig)
	}
	switch {
	case c.Pool == "":
		return bad("Config.Pool is empty: name the pool that the processes sharing node ids use")
	case c.Size <= 0:
		return bad("Config.Size is %d: set the number of node ids, such as the layout's MaxNode()+1", c.Size)
	case c.Size > maxSize:
		return bad("Config.Size %d is more than 2^53 node ids", c.Size)
	case c.Lease < minLease:
		return bad("Config.Lease %v is below %v: use a lease of seconds, renewed well within it", c.Lease, minLease)
	case c.Lease%time.Millisecond != 0:
		return bad("Config.Lease %v is not whole milliseconds, which the scripts count in", c.Lease)
	}
	return nil
}

// Leaser is an [idgen.Leaser] over one pool in Redis. It is safe for
// concurrent use. Acquire hands out the node that waited longest, from one
// central queue: never-used ids first, in order, then freed ids in the
// order they became free, so that a retired node rests as long as the pool
// allows.
//
// The keys of a pool share the hash tag {<namespace>:<pool>}, where namespace
// and pool have '%', '{', '}' and ':' percent-encoded, so that on Redis
// Cluster a pool lives on one node and no script touches two slots:
//
//	{idemq:orders}:meta    hash    lease and size (fixed at creation), created,
//	                               recovering (the fence's end, ms)
//	{idemq:orders}:next    string  the lowest never-used node id
//	{idemq:orders}:free    list    freed node ids, granted from the head
//	{idemq:orders}:live    zset    node id → lease end (ms, Redis clock)
//	{idemq:orders}:holder  hash    node id → token of its lease
//	{idemq:orders}:owner   hash    node id → LeaseRequest.Owner
//	{idemq:orders}:token   hash    token → node id
//	{idemq:orders}:mark    hash    node id → high-water mark (ms, rounded up)
//	{idemq:orders}:ahead   set     never-used ids above next taken statically
//
// A pool takes a few dozen bytes per node id it has handed out. Expired
// leases move to the free list, in the order they ended, at the next
// Acquire or Release; no background job runs.
type Leaser struct {
	client redis.UniversalClient
	pool   string
	size   int64
	lease  time.Duration
	keys   []string
	// args are the scripts' first two arguments: lease ms and size.
	leaseArg, sizeArg string
}

var _ idgen.Leaser = (*Leaser)(nil)

// New returns a Leaser of the pool cfg names through client, which the
// caller owns: the Leaser never closes it. New does no I/O; the first
// Acquire finds out whether Redis answers.
func New(client redis.UniversalClient, cfg Config) (*Leaser, error) {
	if client == nil {
		return nil, errors.New("redisidgen: nil client")
	}
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	l := &Leaser{
		client:   client,
		pool:     cfg.Pool,
		size:     cfg.Size,
		lease:    cfg.Lease,
		leaseArg: strconv.FormatInt(cfg.Lease.Milliseconds(), 10),
		sizeArg:  strconv.FormatInt(cfg.Size, 10),
	}
	tag := rediskey.HashTag(cfg.Namespace, cfg.Pool)
	for _, s := range keySuffixes {
		l.keys = append(l.keys, tag+s)
	}
	return l, nil
}

// Acquire implements [idgen.Leaser]. The token is made here, before the
// script runs, so that a script that go-redis sends again after a lost
// reply finds the lease it granted and returns it: a dropped connection
// never costs a node.
func (l *Leaser) Acquire(ctx context.Context, req idgen.LeaseRequest) (idgen.Lease, error) {
	fail := func(err error) (idgen.Lease, error) {
		return idgen.Lease{}, fmt.Errorf("redisidgen: acquire in pool %q: %w", l.pool, err)
	}
	if l.size-1 > req.MaxNode {
		return fail(fmt.Errorf("the pool's node ids run to %d, the layout's to %d: %w", l.size-1, req.MaxNode, idgen.ErrInvalidConfig))
	}
	if req.Static && (req.Node < 0 || req.Node >= l.size) {
		return fail(fmt.Errorf("node %d is outside the pool's 0..%d: %w", req.Node, l.size-1, idgen.ErrInvalidConfig))
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	token := rand.Text()
	static := "0"
	if req.Static {
		static = "1"
	}
	res, err := l.run(ctx, acquireScript, token, req.Owner, static, strconv.FormatInt(req.Node, 10))
	if err != nil {
		return fail(err)
	}
	switch res.code {
	case codeOK:
		return idgen.Lease{Node: res.int(1), Token: token, TTL: l.lease, HighWater: fromMillis(res.int(2))}, nil
	case codeNone:
		if req.Static {
			return fail(fmt.Errorf("node %d is held: %w", req.Node, idgen.ErrNoFreeNode))
		}
		return fail(fmt.Errorf("all %d node ids are held: %w", l.size, idgen.ErrNoFreeNode))
	case codeRecovering:
		left := time.Duration(res.int(1)) * time.Millisecond
		until := fromMillis(res.int(2)).Format(time.RFC3339Nano)
		return fail(fmt.Errorf("the pool is new or Redis lost its records; nothing is granted for %v more, until %s by the Redis clock, so that every holder of a lost lease has stopped first: %w", left, until, idgen.ErrNoFreeNode))
	}
	return fail(res.err())
}

// Renew implements [idgen.Leaser]. A lease whose records Redis lost fails
// with [idgen.ErrLeaseLost].
func (l *Leaser) Renew(ctx context.Context, lease idgen.Lease, highWater time.Time) (idgen.Lease, error) {
	fail := func(err error) (idgen.Lease, error) {
		return idgen.Lease{}, fmt.Errorf("redisidgen: renew node %d in pool %q: %w", lease.Node, l.pool, err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	res, err := l.run(ctx, renewScript, lease.Token, strconv.FormatInt(lease.Node, 10), toMillis(highWater))
	if err != nil {
		return fail(err)
	}
	if res.code == codeOK {
		lease.TTL, lease.HighWater = l.lease, fromMillis(res.int(1))
		return lease, nil
	}
	return fail(res.err())
}

// Release implements [idgen.Leaser]. A Release that go-redis sends again
// after a lost reply fails with [idgen.ErrLeaseLost]: the first one
// released the node.
func (l *Leaser) Release(ctx context.Context, lease idgen.Lease, highWater time.Time) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisidgen: release node %d in pool %q: %w", lease.Node, l.pool, err)
	}
	res, err := l.run(ctx, releaseScript, lease.Token, strconv.FormatInt(lease.Node, 10), toMillis(highWater))
	if err == nil && res.code != codeOK {
		err = res.err()
	}
	if err != nil {
		return fmt.Errorf("redisidgen: release node %d in pool %q: %w", lease.Node, l.pool, err)
	}
	return nil
}

// Create records a brand-new pool, ready to grant at once. It fails with
// [ErrPoolExists] if Redis holds any key of the pool. Without Create, the
// first Acquire of a pool waits one lease as after lost records; Create
// skips that wait, which is safe only when no process holds a lease of
// the pool. After Redis lost everything no key is left to refuse it, so
// never call it on every start: a process restarted right after Redis lost
// its data would hand out nodes that live holders are still using.
func (l *Leaser) Create(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisidgen: create pool %q: %w", l.pool, err)
	}
	res, err := l.run(ctx, createScript)
	switch {
	case err != nil:
		return fmt.Errorf("redisidgen: create pool %q: %w", l.pool, err)
	case res.code == codeExists:
		// ErrPoolExists names the package already.
		return fmt.Errorf("%w: Redis holds keys of pool %q", ErrPoolExists, l.pool)
	case res.code != codeOK:
		return fmt.Errorf("redisidgen: create pool %q: %w", l.pool, res.err())
	}
	return nil
}

// LeaseInfo describes a live lease, for operators.
type LeaseInfo struct {
	Node  int64
	Owner string
	// Expires is the end of the lease by the Redis server's clock.
	Expires time.Time
	// HighWater is the node's high-water mark; zero if none was written.
	HighWater time.Time
}

// List returns the pool's live leases by node id. It fails with
// [idgen.ErrNoFreeNode] when Redis has no record of the pool: it was never
// used, or Redis lost it, and the next Acquire starts the fence.
func (l *Leaser) List(ctx context.Context) ([]LeaseInfo, error) {
	fail := func(err error) ([]LeaseInfo, error) {
		return nil, fmt.Errorf("redisidgen: list pool %q: %w", l.pool, err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	res, err := l.run(ctx, listScript)
	if err != nil {
		return fail(err)
	}
	switch res.code {
	case codeOK:
	case codeMissing:
		return fail(fmt.Errorf("Redis has no record of the pool, which grants nothing until a first Acquire's fence has passed: %w", idgen.ErrNoFreeNode))
	default:
		return fail(res.err())
	}
	var out []LeaseInfo
	for i := 1; i+3 < len(res.vals); i += 4 {
		owner, _ := res.vals[i+1].(string)
		out = append(out, LeaseInfo{
			Node:      res.int(i),
			Owner:     owner,
			Expires:   fromMillis(res.int(i + 2)),
			HighWater: fromMillis(res.int(i + 3)),
		})
	}
	slices.SortFunc(out, func(a, b LeaseInfo) int { return cmp.Compare(a.Node, b.Node) })
	return out, nil
}

// run runs script over the pool's keys with the lease, the size and args.
func (l *Leaser) run(ctx context.Context, script *redis.Script, args ...any) (result, error) {
	args = append([]any{l.leaseArg, l.sizeArg}, args...)
	vals, err := script.Run(ctx, l.client, l.keys, args...).Slice()
	if err != nil {
		return result{}, err
	}
	if len(vals) == 0 {
		return result{}, errors.New("empty script answer")
	}
	code, _ := vals[0].(string)
	return result{l: l, code: code, vals: vals}, nil
}

// result is a script's answer.
type result struct {
	l    *Leaser
	code string
	vals []any
}

func (r result) int(i int) int64 {
	if i < len(r.vals) {
		n, _ := r.vals[i].(int64)
		return n
	}
	return 0
}

// err turns an answer no caller expects into an error.
func (r result) err() error {
	switch r.code {
	case codeLost:
		return idgen.ErrLeaseLost
	case codeConfig:
		return fmt.Errorf("the pool was created with Lease %v and Size %d, this leaser has Lease %v and Size %d: a holder could outlive what the others take for its lease; give every leaser of a pool the same settings, or use a new pool: %w",
			time.Duration(r.int(1))*time.Millisecond, r.int(2), r.l.lease, r.l.size, idgen.ErrInvalidConfig)
	}
	return fmt.Errorf("unexpected script answer %v", r.vals)
}

// toMillis renders a high-water mark for the scripts, rounded up so that
// the mark never falls below what the holder wrote; "0" for none.
func toMillis(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	ms := t.UnixMilli()
	if t.After(time.UnixMilli(ms)) {
		ms++
	}
	return strconv.FormatInt(ms, 10)
}

// fromMillis reads a mark or a time the scripts return; 0 is none.
func fromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
