package redisidgen

import "github.com/redis/go-redis/v9"

// The fields of a tag's hash: Leaf's columns, readable with HGETALL.
const (
	fieldMaxID       = "max_id"      // end of the last segment reserved
	fieldStep        = "step"        // the stored step
	fieldMaxLimit    = "max_limit"   // the maximum; 0 for none
	fieldDescription = "description" // for operators
	fieldUpdateTime  = "update_time" // ms since the Unix epoch, by the server's TIME
)

// The segment scripts answer a table whose first element is one of the
// codes below, or of the leaser's.
const (
	codeUnknown = "unknown" // the tag has no hash
	codeMax     = "max"     // {code, max_id, the top it reached}
	codeBelow   = "below"   // {code, max_id}: SetMax below max_id
	codeBadStep = "badstep" // {code, stored step}: step 0 and no usable stored step
)

// segmentPrelude is shared by the segment scripts. Every number they handle
// is at most maxSegmentValue, 2^53, which Lua numbers hold exactly; it is
// formatted as an integer before Redis sees it.
const segmentPrelude = `
local function int(x) return string.format('%d', x) end

local function now_ms()
	local t = redis.call('TIME')
	return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`

// nextSegmentScript raises the max_id of tag KEYS[1] by ARGV[1], or by its
// stored step when ARGV[1] is 0, but never past its max_limit, or past
// ARGV[2] when max_limit is 0. Answers {ok, start, end, step, max_limit},
// unknown, max or badstep.
var nextSegmentScript = redis.NewScript(segmentPrelude + `
local h = redis.call('HMGET', KEYS[1], 'max_id', 'step', 'max_limit')
if not h[1] then
	return {'unknown'}
end
local max_id = tonumber(h[1])
local stored = tonumber(h[2] or '0')
local limit = tonumber(h[3] or '0')
local n = tonumber(ARGV[1])
if n == 0 then
	n = stored
end
if n <= 0 then
	return {'badstep', stored}
end
local top = limit
if top == 0 then
	top = tonumber(ARGV[2])
end
if max_id >= top then
	return {'max', max_id, top}
end
if top - max_id < n then
	n = top - max_id
end
local now = now_ms()
local new = redis.call('HINCRBY', KEYS[1], 'max_id', int(n))
redis.call('HSET', KEYS[1], 'update_time', int(now))
return {'ok', new - n, new, stored, limit}
`)

// createTagScript records tag KEYS[1] with max_id ARGV[1], step ARGV[2],
// max_limit ARGV[3] and description ARGV[4], unless it exists. Answers ok
// or exists.
var createTagScript = redis.NewScript(segmentPrelude + `
if redis.call('EXISTS', KEYS[1]) == 1 then
	return {'exists'}
end
redis.call('HSET', KEYS[1], 'max_id', ARGV[1], 'step', ARGV[2], 'max_limit', ARGV[3],
	'description', ARGV[4], 'update_time', int(now_ms()))
return {'ok'}
`)

// setMaxScript sets the max_limit of tag KEYS[1] to ARGV[1] unless that is
// below its max_id and not 0. Answers ok, unknown or below.
var setMaxScript = redis.NewScript(segmentPrelude + `
local max_id = redis.call('HGET', KEYS[1], 'max_id')
if not max_id then
	return {'unknown'}
end
local m = tonumber(ARGV[1])
if m > 0 and tonumber(max_id) > m then
	return {'below', tonumber(max_id)}
end
redis.call('HSET', KEYS[1], 'max_limit', ARGV[1], 'update_time', int(now_ms()))
return {'ok'}
`)
