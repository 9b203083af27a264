package redisidgen

import "github.com/redis/go-redis/v9"

// The keys of one pool, in the order every script takes them (KEYS[i+1]).
const (
	keyMeta   = iota // hash: lease, size, created, recovering (ms)
	keyNext          // string: the lowest never-used node id
	keyFree          // list: freed node ids, the next to grant first
	keyLive          // sorted set: node id → lease end (ms)
	keyHolder        // hash: node id → token
	keyOwner         // hash: node id → owner
	keyToken         // hash: token → node id
	keyMark          // hash: node id → high-water mark (ms)
	keyAhead         // set: never-used ids at or above next taken statically
	numKeys
)

// keySuffixes name the keys after the pool's hash tag.
var keySuffixes = [numKeys]string{":meta", ":next", ":free", ":live", ":holder", ":owner", ":token", ":mark", ":ahead"}

// Every script takes ARGV[1] = the lease in ms and ARGV[2] = the pool size,
// as decimal strings, and answers a table whose first element is one of
// the codes below.
const (
	codeOK         = "ok"
	codeNone       = "none"       // no free node, or the static node is held
	codeLost       = "lost"       // the lease has ended or is not the node's
	codeRecovering = "recovering" // {code, ms left, until ms}
	codeConfig     = "config"     // {code, recorded lease ms, recorded size}
	codeExists     = "exists"     // Create found keys of the pool
	codeMissing    = "missing"    // List found no meta record
)

// prelude is shared by the scripts. Times are milliseconds of the server's
// TIME, read before any write (Redis replicates a script's effects, so a
// script that reads the clock may write). Numbers are formatted as integers
// before Redis sees them: Redis would print a large Lua number in exponent
// form.
const prelude = `
local function int(x) return string.format('%d', x) end

local function now_ms()
	local t = redis.call('TIME')
	return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- check_meta returns nil when the pool's record matches this leaser, or
-- the answer to give: missing (the record is gone) or config.
local function check_meta()
	local m = redis.call('HMGET', KEYS[1], 'lease', 'size', 'recovering')
	if not m[1] then
		return {'missing'}, 0
	end
	if m[1] ~= ARGV[1] or m[2] ~= ARGV[2] then
		return {'config', tonumber(m[1]), tonumber(m[2])}, 0
	end
	return nil, tonumber(m[3] or '0')
end

-- reclaim moves the nodes whose lease ended at or before now to the tail of
-- the free list, in the order they ended.
local function reclaim(now)
	local ended = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', int(now))
	for _, n in ipairs(ended) do
		local tok = redis.call('HGET', KEYS[5], n)
		if tok then
			redis.call('HDEL', KEYS[7], tok)
		end
		redis.call('HDEL', KEYS[5], n)
		redis.call('HDEL', KEYS[6], n)
		redis.call('RPUSH', KEYS[3], n)
	end
	if #ended > 0 then
		redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', int(now))
	end
end

-- holds reports whether token holds node's live lease.
local function holds(node, token, now)
	local ends = redis.call('ZSCORE', KEYS[4], node)
	return ends and tonumber(ends) > now and redis.call('HGET', KEYS[5], node) == token
end

-- owned returns the server's now, and the answer to give unless token
-- ARGV[3] holds node ARGV[4]'s live lease in a pool this leaser matches: a
-- pool without its record has lost every lease.
local function owned()
	local now = now_ms()
	local bad = check_meta()
	if bad and bad[1] == 'missing' then
		return now, {'lost'}
	elseif bad then
		return now, bad
	end
	if not holds(ARGV[4], ARGV[3], now) then
		return now, {'lost'}
	end
	return now, nil
end

-- raise raises node's high-water mark to mark and returns the mark.
local function raise(node, mark)
	local cur = tonumber(redis.call('HGET', KEYS[8], node) or '0')
	if mark > cur then
		redis.call('HSET', KEYS[8], node, int(mark))
		return mark
	end
	return cur
end
`

// acquireScript grants a node for token ARGV[3] with owner ARGV[4]: node
// ARGV[6] if ARGV[5] is "1", else the free node that waited longest. A
// token that already holds a node (go-redis retrying after a lost reply)
// gets that node back. A pool without its meta record is new or has lost
// its records: the script records it as recovering for one lease and
// grants nothing. Answers {ok, node, mark}, none, config or recovering.
var acquireScript = redis.NewScript(prelude + `
local now = now_ms()
local lease = tonumber(ARGV[1])
local token, owner = ARGV[3], ARGV[4]
local bad, recovering = check_meta()
if bad and bad[1] == 'missing' then
	redis.call('HSET', KEYS[1], 'lease', ARGV[1], 'size', ARGV[2], 'created', int(now), 'recovering', int(now + lease))
	return {'recovering', lease, now + lease}
elseif bad then
	return bad
elseif now < recovering then
	return {'recovering', recovering - now, recovering}
end
reclaim(now)

local node = redis.call('HGET', KEYS[7], token)
if node then
	node = tonumber(node)
else
	if ARGV[5] == '1' then
		node = tonumber(ARGV[6])
		if redis.call('ZSCORE', KEYS[4], ARGV[6]) then
			return {'none'}
		end
		local nxt = tonumber(redis.call('GET', KEYS[2]) or '0')
		if node < nxt or redis.call('SADD', KEYS[9], ARGV[6]) == 0 then
			redis.call('LREM', KEYS[3], 1, ARGV[6])
		end
	else
		local size = tonumber(ARGV[2])
		local nxt = tonumber(redis.call('GET', KEYS[2]) or '0')
		local first = nxt
		while nxt < size and not node do
			if redis.call('SREM', KEYS[9], int(nxt)) == 0 then
				node = nxt
			end
			nxt = nxt + 1
		end
		if nxt > first then
			redis.call('SET', KEYS[2], int(nxt))
		end
		if not node then
			node = redis.call('LPOP', KEYS[3])
			if not node then
				return {'none'}
			end
			node = tonumber(node)
		end
	end
	redis.call('HSET', KEYS[5], int(node), token)
	redis.call('HSET', KEYS[6], int(node), owner)
	redis.call('HSET', KEYS[7], token, int(node))
end
redis.call('ZADD', KEYS[4], int(now + lease), int(node))
return {'ok', node, tonumber(redis.call('HGET', KEYS[8], int(node)) or '0')}
`)

// renewScript extends the lease of node ARGV[4] held by token ARGV[3] and
// raises its mark to ARGV[5]. Answers {ok, mark}, lost or config.
var renewScript = redis.NewScript(prelude + `
local now, bad = owned()
if bad then
	return bad
end
redis.call('ZADD', KEYS[4], int(now + tonumber(ARGV[1])), ARGV[4])
return {'ok', raise(ARGV[4], tonumber(ARGV[5]))}
`)

// releaseScript ends the lease of node ARGV[4] held by token ARGV[3], sets
// its mark to ARGV[5] unless that is 0 (the holder's exact mark, which may
// lie below what its renewals reserved) and puts the node at the tail of
// the free list, behind the leases that ended before. Answers ok, lost or
// config.
var releaseScript = redis.NewScript(prelude + `
local now, bad = owned()
if bad then
	return bad
end
if tonumber(ARGV[5]) > 0 then
	redis.call('HSET', KEYS[8], ARGV[4], ARGV[5])
end
reclaim(now)
redis.call('ZREM', KEYS[4], ARGV[4])
redis.call('HDEL', KEYS[5], ARGV[4])
redis.call('HDEL', KEYS[6], ARGV[4])
redis.call('HDEL', KEYS[7], ARGV[3])
redis.call('RPUSH', KEYS[3], ARGV[4])
return {'ok'}
`)

// createScript records a pool that has no key at all, ready to grant.
// Answers ok or exists.
var createScript = redis.NewScript(prelude + `
if redis.call('EXISTS', unpack(KEYS)) > 0 then
	return {'exists'}
end
redis.call('HSET', KEYS[1], 'lease', ARGV[1], 'size', ARGV[2], 'created', int(now_ms()), 'recovering', '0')
return {'ok'}
`)

// listScript reads the live leases. Answers {ok, then node, owner, end and
// mark per lease}, missing or config.
var listScript = redis.NewScript(prelude + `
local now = now_ms()
local bad = check_meta()
if bad then
	return bad
end
local out = {'ok'}
local live = redis.call('ZRANGEBYSCORE', KEYS[4], '(' .. int(now), '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
	local n = live[i]
	out[#out + 1] = tonumber(n)
	out[#out + 1] = redis.call('HGET', KEYS[6], n) or ''
	out[#out + 1] = tonumber(live[i + 1])
	out[#out + 1] = tonumber(redis.call('HGET', KEYS[8], n) or '0')
end
return out
`)
