package redisdedupe

import "github.com/redis/go-redis/v9"

// A record's value is its state byte ('p' processing, 'd' done), the owner
// token (tokenLen bytes, so it ends at byte 27) and the fingerprint, then,
// in a done record whose completion named its run, a newline and the
// trace ([dedupe.Ticket.Trace]; neither a fingerprint nor a trace holds a
// control character). Its TTL is the lease or the retention.
//
// Across a rolling upgrade, a version that keeps no trace reads such a
// record's fingerprint and trace as a fingerprint of another length,
// which it does not compare ([dedupe.Item.Fingerprint]): it answers
// Suppressed for the key, right but for a reuse that it misses, as
// between fingerprint kinds; it completes and releases such records as
// before. A version that keeps traces reads an older one's records as
// records without a trace.
const tokenLen = 26

// traceSep ends a record's fingerprint where a trace follows.
const traceSep = '\n'

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
// (Lua's #, which an empty one shares only with another) and different; a
// record's fingerprint ends at its trace, if any. It returns the server's
// TIME (seconds, microseconds; zero when no answer needs it), then per key
// a status code and the record's PTTL in milliseconds, then for each key
// answered done, in order, the trace its completion kept ("" for none):
// an answer that is not done costs no string to read.
var claimScript = redis.NewScript(`
local out = {0, 0}
local traces = {}
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
		local had, fp, trace = string.sub(v, 28), string.sub(rec, 28), ''
		local e = string.find(had, '\n', 1, true)
		if e then
			had, trace = string.sub(had, 1, e - 1), string.sub(had, e + 1)
		end
		if #had == #fp and had ~= fp then
			out[2*i+1] = 4
			out[2*i+2] = 0
		else
			if string.sub(v, 1, 1) == 'd' then
				out[2*i+1] = 2
				traces[#traces+1] = trace
			else
				out[2*i+1] = 3
			end
			out[2*i+2] = redis.call('PTTL', key)
			timed = true
		end
	end
end
for _, trace in ipairs(traces) do
	out[#out+1] = trace
end
if timed then
	local t = redis.call('TIME')
	out[1] = tonumber(t[1])
	out[2] = tonumber(t[2])
end
return out
`)

// completeScript marks KEYS[i] done for ARGV[1] milliseconds if token
// ARGV[i+1] owns it, or completed it before (a retry), with the trace that
// follows the token in ARGV[i+1] after a newline, if any, in place of the
// record's. It returns per key 1 if it did and 0 if the token does not own
// the record.
var completeScript = redis.NewScript(`
local out = {}
for i, key in ipairs(KEYS) do
	local v = redis.call('GET', key)
	local tok, trace = ARGV[i+1], ''
	local t = string.find(tok, '\n', 1, true)
	if t then
		tok, trace = string.sub(tok, 1, t - 1), string.sub(tok, t)
	end
	if v and string.sub(v, 2, 27) == tok then
		local e = string.find(v, '\n', 28, true)
		if e then
			v = string.sub(v, 1, e - 1)
		end
		redis.call('SET', key, 'd' .. string.sub(v, 2) .. trace, 'PX', ARGV[1])
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
