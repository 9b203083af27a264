package redisdedupe

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/dedupekit"
)

var _ dedupe.Inspector = (*Store)(nil)

// inspectScript reads the records KEYS name: it returns the server's TIME
// (seconds, microseconds), then per key its value (nil if there is none)
// and its PTTL in milliseconds. One script reads a page in one round trip,
// and time stands still inside it, so a value and its TTL agree.
var inspectScript = redis.NewScript(`
local t = redis.call('TIME')
local out = {tonumber(t[1]), tonumber(t[2])}
for i, key in ipairs(KEYS) do
	out[2*i+1] = redis.call('GET', key)
	out[2*i+2] = redis.call('PTTL', key)
end
return out
`)

// statsScript counts the records KEYS name by state: it returns the
// processing ones, then the done ones. It reads only the state byte.
var statsScript = redis.NewScript(`
local p, d = 0, 0
for _, key in ipairs(KEYS) do
	local state = redis.call('GETRANGE', key, 0, 0)
	if state == 'p' then
		p = p + 1
	elseif state == 'd' then
		d = d + 1
	end
end
return {p, d}
`)

// A listing takes SCAN steps of at most scanCount keys (or the page's
// limit, if more), and at most maxScanSteps of them per page: a page costs
// the server a bounded amount of work, and a sparse group's listing few
// round trips.
const (
	scanCount    = 1000
	maxScanSteps = 64
)

// Get implements [dedupe.Inspector] with one script.
func (s *Store) Get(ctx context.Context, ref dedupe.Ref) (dedupe.Record, bool, error) {
	err := checkRef(ref)
	if err == nil {
		err = ctx.Err()
	}
	var recs []dedupe.Record
	if err == nil {
		recs, err = s.read(ctx, ref.Namespace, ref.Group, []string{s.key(ref)})
	}
	if err != nil {
		return dedupe.Record{}, false, fmt.Errorf("redisdedupe: get %q: %w", ref, err)
	}
	if len(recs) == 0 {
		return dedupe.Record{}, false, nil
	}
	return recs[0], true, nil
}

// List implements [dedupe.Inspector] with SCAN on the node that holds the
// group (on a cluster, the master of its hash slot), MATCH its keys'
// prefix, and one script per step that reads the records found. The cursor
// is SCAN's, and a page comes in SCAN order (see [dedupe.Inspector] for
// what that allows). SCAN does not block Redis, but it walks every key on
// the node, every group's included: a page costs at most 64 steps of 1000
// keys, O(keys on the node) for a whole listing, not O(the group's
// records). On a node of millions of keys, list off-peak.
//
// Each step's COUNT is sized by the share of the keys scanned so far that
// were the group's, to find about as many as the page has room for. A
// step that finds more is taken again from the same cursor with a smaller
// COUNT, down to the room left, so that a page holds Limit records or a few
// more (the rest of SCAN's last bucket): a step taken again is a plain SCAN
// from a cursor the server gave, and keeps SCAN's guarantees, where cutting
// a step's keys short would lose the rest. A page three quarters full
// ends the call rather than take small steps for the last few records.
func (s *Store) List(ctx context.Context, req dedupe.ListRequest) ([]dedupe.Record, string, error) {
	page, next, err := s.list(ctx, req)
	if err != nil {
		return nil, "", fmt.Errorf("redisdedupe: list %q: %w", req.Namespace+"/"+req.Group+"/"+req.Prefix+"*", err)
	}
	return page, next, nil
}

func (s *Store) list(ctx context.Context, req dedupe.ListRequest) ([]dedupe.Record, string, error) {
	if err := dedupekit.CheckList(req.Namespace, req.Group, req.Prefix, req.Limit); err != nil {
		return nil, "", err
	}
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	var cur uint64
	if req.Cursor != "" {
		var err error
		if cur, err = strconv.ParseUint(req.Cursor, 10, 64); err != nil || cur == 0 {
			return nil, "", fmt.Errorf("cursor %q is not one List returned", req.Cursor)
		}
	}
	limit := req.Limit
	if limit == 0 {
		limit = dedupekit.DefaultListLimit
	}
	base := s.groupKey(req.Namespace, req.Group)
	node, err := s.node(ctx, base)
	if err != nil {
		return nil, "", err
	}
	pattern := glob(base+req.Prefix) + "*"
	var (
		page     []dedupe.Record
		seen     = map[string]bool{} // SCAN may find a key twice
		maxCount = max(limit, scanCount)
		count    = maxCount
		enough   = (3*limit + 3) / 4
	)
	for range maxScanSteps {
		room := limit - len(page)
		keys, next, err := node.Scan(ctx, cur, pattern, int64(count)).Result()
		if err != nil {
			return nil, "", err
		}
		keys = fresh(keys, seen)
		if len(keys) > room && count > room {
			count = max(room, count*room/len(keys)*9/10)
			continue
		}
		for _, k := range keys {
			seen[k] = true
		}
		if len(keys) > 0 {
			recs, err := s.read(ctx, req.Namespace, req.Group, keys)
			if err != nil {
				return nil, "", err
			}
			page = append(page, recs...)
		}
		cur = next
		if cur == 0 || len(page) >= enough {
			break
		}
		if room = limit - len(page); len(keys) > 0 {
			count = min(max(count*room/len(keys), room), maxCount)
		} else {
			count = maxCount
		}
	}
	if cur == 0 {
		return page, "", nil
	}
	return page, strconv.FormatUint(cur, 10), nil
}

// fresh returns the keys not in seen, in keys' array.
func fresh(keys []string, seen map[string]bool) []string {
	n := 0
	for _, k := range keys {
		if !seen[k] {
			keys[n] = k
			n++
		}
	}
	return keys[:n]
}

// Stats implements [dedupe.Inspector]: a whole SCAN of the node that holds
// the group, as List takes, with a script per step that counts the group's
// records by state. It walks every key on the node, in steps of 1000.
func (s *Store) Stats(ctx context.Context, namespace, group string) (dedupe.Stats, error) {
	st, err := s.stats(ctx, namespace, group)
	if err != nil {
		return dedupe.Stats{}, fmt.Errorf("redisdedupe: stats %q: %w", namespace+"/"+group, err)
	}
	return st, nil
}

func (s *Store) stats(ctx context.Context, namespace, group string) (dedupe.Stats, error) {
	if err := dedupekit.CheckList(namespace, group, "", 0); err != nil {
		return dedupe.Stats{}, err
	}
	if err := ctx.Err(); err != nil {
		return dedupe.Stats{}, err
	}
	base := s.groupKey(namespace, group)
	node, err := s.node(ctx, base)
	if err != nil {
		return dedupe.Stats{}, err
	}
	var (
		st  dedupe.Stats
		cur uint64
	)
	pattern := glob(base) + "*"
	for {
		keys, next, err := node.Scan(ctx, cur, pattern, scanCount).Result()
		if err != nil {
			return dedupe.Stats{}, err
		}
		if len(keys) > 0 {
			n, err := statsScript.Run(ctx, s.client, keys).Int64Slice()
			if err != nil {
				return dedupe.Stats{}, err
			}
			if len(n) != 2 {
				return dedupe.Stats{}, fmt.Errorf("script answered %d values, want 2", len(n))
			}
			st.Processing += n[0]
			st.Done += n[1]
		}
		if cur = next; cur == 0 {
			return st, nil
		}
	}
}

// Forget implements [dedupe.Inspector] with one DEL.
func (s *Store) Forget(ctx context.Context, ref dedupe.Ref) (bool, error) {
	err := checkRef(ref)
	if err == nil {
		err = ctx.Err()
	}
	var n int64
	if err == nil {
		n, err = s.client.Del(ctx, s.key(ref)).Result()
	}
	if err != nil {
		return false, fmt.Errorf("redisdedupe: forget %q: %w", ref, err)
	}
	return n == 1, nil
}

// read returns the records that keys, of one group, hold, leaving out
// those that are gone. Tokens stay on the server's side of the record.
func (s *Store) read(ctx context.Context, namespace, group string, keys []string) ([]dedupe.Record, error) {
	vals, err := inspectScript.Run(ctx, s.client, keys).Slice()
	if err != nil {
		return nil, err
	}
	if len(vals) != 2+2*len(keys) {
		return nil, fmt.Errorf("script answered %d values for %d keys", len(vals), len(keys))
	}
	sec, _ := vals[0].(int64)
	usec, _ := vals[1].(int64)
	now := time.UnixMicro(sec*1e6 + usec)
	base := len(s.groupKey(namespace, group))
	var recs []dedupe.Record
	for i, key := range keys {
		v, _ := vals[2+2*i].(string)
		ttl, _ := vals[3+2*i].(int64)
		if v == "" || ttl == -2 {
			continue // gone since the SCAN
		}
		if len(v) < 1+tokenLen || v[0] != 'p' && v[0] != 'd' {
			return nil, fmt.Errorf("key %q holds no record of this store", key)
		}
		fp, trace := fields(v)
		rec := dedupe.Record{
			Ref:         dedupe.Ref{Namespace: namespace, Group: group, Key: key[base:]},
			Done:        v[0] == 'd',
			Fingerprint: fp,
			Trace:       trace,
		}
		if ttl >= 0 {
			rec.Expires = now.Add(time.Duration(ttl) * time.Millisecond)
		}
		recs = append(recs, rec)
	}
	return recs, nil
}

// groupKey returns the start of every key of the group's records.
func (s *Store) groupKey(namespace, group string) string {
	return s.key(dedupe.Ref{Namespace: namespace, Group: group})
}

// node returns the client that a SCAN of key's hash slot goes to: on a
// cluster the master that owns the slot, on a ring the shard of key, and
// the client itself otherwise.
func (s *Store) node(ctx context.Context, key string) (redis.Cmdable, error) {
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	case *redis.Ring:
		return c.GetShardClientForKey(key)
	}
	return s.client, nil
}

// glob escapes the bytes that are syntax in a SCAN MATCH pattern, so that
// the pattern matches s byte for byte.
func glob(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(`*?[]\`, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
