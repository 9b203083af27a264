package redisdedupe

import "github.com/redis/go-redis/v9"

// A record's value is its state byte ('p' processing, 'd' done), the owner
// token (tokenLen bytes, so it ends at byte 27) and the fingerprint. Its TTL
// is the lease or the retention.
const tokenLen = 26

// Claim status codes returned by claimScript.
const (
	codeAcquired = 1
	codeDone     = 2
	codeInFlight = 3
	codeConflict = 4
)

// claimScript claims KEYS[i] by writing the record ARGV[2i-1] (state 'p',
// token, fingerprint) with a TTL of ARGV[2i] milliseconds where no record
// exists, in order. A record that is ARGV[2i-1] already is the claim's own:
// go-redis resends a script whose answer a dropped connection lost, and the
// token is fresh per claim, so no other claim wrote it. Fingerprints
// conflict as [dedupe.FingerprintsConflict] says: the same length in bytes
// (Lua's #, which an empty one shares only with another) and different. It
// returns the server's TIME (seconds, microseconds; zero when no answer
// needs it), then per key a status code and the record's PTTL in
// milliseconds.
var claimScript = redis.NewScript(`
local out = {0, 0}
local timed = false
for i, key in ipairs(KEYS) do
	local rec = ARGV[2*i-1]
	local v = nil
	if not redis.call('SET', key, rec, 'NX', 'PX', ARGV[2*i]) then
		v = redis.call('GET', key)
	end
	if v == nil or v == rec then
		out[2*i+1] = 1
		out[2*i+2] = 0
	else
		local had, fp = string.sub(v, 28), string.sub(rec, 28)
		if #had == #fp and had ~= fp then
			out[2*i+1] = 4
			out[2*i+2] = 0
		else
			if string.sub(v, 1, 1) == 'd' then
				out[2*i+1] = 2
			else
				out[2*i+1] = 3
			end
			out[2*i+2] = redis.call('PTTL', key)
			timed = true
		end
	end
end
if timed then
	local t = redis.call('TIME')
	out[1] = tonumber(t[1])
	out[2] = tonumber(t[2])
end
return out
`)

// completeScript marks KEYS[i] done for ARGV[1] milliseconds if token
// ARGV[i+1] owns it, or completed it before (a retry). It returns per key 1
// if it did and 0 if the token does not own the record.
var completeScript = redis.NewScript(`
local out = {}
for i, key in ipairs(KEYS) do
	local v = redis.call('GET', key)
	if v and string.sub(v, 2, 27) == ARGV[i+1] then
		redis.call('SET', key, 'd' .. string.sub(v, 2), 'PX', ARGV[1])
		out[i] = 1
	else
		out[i] = 0
	end
end
return out
`)

// releaseScript deletes KEYS[i] if token ARGV[i] owns it and it is
// processing. It returns per key 1 if it did and 0 otherwise.
var releaseScript = redis.NewScript(`
local out = {}
for i, key in ipairs(KEYS) do
	local v = redis.call('GET', key)
	if v and string.sub(v, 1, 27) == 'p' .. ARGV[i] then
		redis.call('DEL', key)
		out[i] = 1
	else
		out[i] = 0
	end
end
return out
`)

// extendScript sets KEYS[1]'s TTL to ARGV[2] milliseconds if token ARGV[1]
// owns it and it is processing. It returns {1} if it did and {0}
// otherwise, as the batch scripts answer for one key.
var extendScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 27) == 'p' .. ARGV[1] then
	redis.call('PEXPIRE', KEYS[1], ARGV[2])
	return {1}
end
return {0}
`)

// The hashes of the scripts that a single call runs, boxed once for its
// EVALSHA.
var (
	completeHash any = completeScript.Hash()
	releaseHash  any = releaseScript.Hash()
	extendHash   any = extendScript.Hash()
)
