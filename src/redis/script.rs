//! The two Lua scripts: record a trip (and announce it), list the open trips
//! (reconciliation). They run the rules [`MemoryStore`](crate::share::MemoryStore)
//! runs in process; a test runs both on the same inputs.
//!
//! Neither trusts what it reads. A record is taken only whole — every field
//! present, of its type (`epoch`, `until` and `reporters` non-negative
//! integers, `reason` a trip reason, `origin` a replica name) — and a key of
//! the wrong Redis type under the store's names is no record, no reporters
//! set, no index. What is not is *bad*: reconciliation skips it (and drops
//! it from the index, so it is counted once), a trip of its key replaces
//! it, and both scripts return how many they found. No bad record makes a
//! script fail, so one key's junk never stops the others' sharing.

use redis::{Cmd, ErrorKind, RedisError, Script, ServerErrorKind};

use super::keys::Shard;
use crate::share::{LocalTrip, MAX_ORIGIN_BYTES, TRIP_REASONS};

/// What both scripts share: the record reader and its checks. `REASONS`
/// and `MAX_ORIGIN` are filled in from the crate's own lists
/// ([`Scripts::new`]).
///
/// `record(name)` returns `nil` for no record (none of its fields),
/// `false` for a bad one (the wrong Redis type, a field missing or
/// malformed: `epoch`, `until` and `reporters` must be decimal digits of
/// a number in range, `reason` a trip reason, `origin` a replica name),
/// else `true`, the three numbers, and the fields as stored (digits only,
/// so they go on the wire as they are). `zadd` replaces a key of the wrong
/// type. Both count what they set aside in `bad`. Wrong types are found by
/// the command failing (`redis.pcall`), not by asking `TYPE` first: the
/// usual path asks nothing more. The checks cost server time all the same:
/// on the development host, a trip script about 78 µs against 67 µs
/// before them, and reconciling 10,000 open keys of one shard about 125 ms
/// against 78 ms.
const PRELUDE: &str = r"
local REASONS = {__REASONS__}
local MAX_ORIGIN = __MAX_ORIGIN__
local bad = 0
local function whole(v, digits, max)
  if type(v) ~= 'string' or #v > digits or not string.find(v, '^%d+$') then return nil end
  local n = tonumber(v)
  if n > max then return nil end
  return n
end
local function origin_ok(o)
  return type(o) == 'string' and #o >= 1 and #o <= MAX_ORIGIN and not string.find(o, '[^!-{}~]')
end
local function failed(reply)
  return type(reply) == 'table' and reply.err ~= nil
end
local function record(name)
  local r = redis.pcall('HMGET', name, 'epoch', 'until', 'reporters', 'reason', 'origin')
  if failed(r) then return false end
  if not (r[1] or r[2] or r[3] or r[4] or r[5]) then return nil end
  local epoch = whole(r[1], 16, 9007199254740991)
  local until_ms = whole(r[2], 16, 9007199254740991)
  local reporters = whole(r[3], 10, 4294967295)
  if epoch and until_ms and reporters and REASONS[r[4]] and origin_ok(r[5]) then
    return true, epoch, until_ms, reporters, r
  end
  return false
end
local function zadd(key, score, member)
  if failed(redis.pcall('ZADD', key, score, member)) then
    redis.call('DEL', key)
    bad = bad + 1
    redis.call('ZADD', key, score, member)
  end
end
";

/// Records a local trip, atomically, on the store's clock (`TIME`).
///
/// KEYS: the record (hash), the reporters (sorted set), the shard's index
/// (sorted set) — one hash tag, one slot. ARGV: key, origin, remaining ms,
/// reason, slack ms, window ms, the shard's channel.
///
/// 0. A bad record is deleted (it is no record), and so is a reporters set
///    or an index of the wrong Redis type when the script first writes it:
///    each is counted as bad.
/// 1. The reporter joins the key's reporters (scored by now); reporters
///    older than the window leave; the set expires with the window.
/// 2. The period ends at now + remaining, or later if the record says so.
///    Nothing later and no more reporters than the record has: nothing is
///    new, the script publishes nothing and returns `{bad, ''}`.
/// 3. Else the epoch is the record's + 1 or now in microseconds, whichever
///    is greater: it grows across the record's expiry too, so replicas that
///    remember an older epoch take the news of a new trip.
/// 4. The record `{epoch, until, reporters, reason, origin}` expires with
///    the period plus the slack; the key enters the index scored by the
///    period's end (the index expires with its last period plus the slack).
/// 5. `SPUBLISH` on the shard's channel, with what is *left* of the period
///    (`epoch|remaining_ms|reporters|reason|origin|key`), and returns
///    `{bad, news}`.
const TRIP: &str = r"
local old, old_epoch, old_until, old_reporters = record(KEYS[1])
if old == false then
  redis.call('DEL', KEYS[1])
  bad = bad + 1
end
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(now_us / 1000)
local remaining = tonumber(ARGV[3])
local slack = tonumber(ARGV[5])
local window = tonumber(ARGV[6])
zadd(KEYS[2], now, ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
redis.call('PEXPIRE', KEYS[2], window)
local reporters = redis.call('ZCARD', KEYS[2])
local until_ms = now + remaining
local epoch = now_us
if old then
  if old_until >= until_ms and old_reporters >= reporters then
    return {bad, ''}
  end
  if old_until > until_ms then until_ms = old_until end
  local next_epoch = old_epoch + 1
  if next_epoch > epoch then epoch = next_epoch end
end
local left = until_ms - now
local ttl = left + slack
local e = string.format('%.0f', epoch)
redis.call('HSET', KEYS[1], 'epoch', e, 'until', string.format('%.0f', until_ms),
  'reporters', reporters, 'reason', ARGV[4], 'origin', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ttl)
zadd(KEYS[3], until_ms, ARGV[1])
if redis.call('PTTL', KEYS[3]) < ttl then redis.call('PEXPIRE', KEYS[3], ttl) end
local news = e .. '|' .. string.format('%.0f', left) .. '|' .. reporters
  .. '|' .. ARGV[4] .. '|' .. ARGV[2] .. '|' .. ARGV[1]
redis.call('SPUBLISH', ARGV[7], news)
return {bad, news}
";

/// Lists a shard's open trips, on the store's clock, and trims the ended
/// ones from its index.
///
/// KEYS: the shard's index. ARGV: the prefix of the shard's record keys
/// (the records share the index's hash tag, so they live in its slot).
/// Returns `{bad, {news...}}`: one wire-form news per key still open with a
/// record, `epoch|remaining_ms|reporters|reason|origin|key`, and how many
/// bad ones it set aside — an index of the wrong Redis type (deleted), an
/// entry with an empty key or a score out of range, a bad record (their
/// entries leave the index; the record stays for its key's next trip to
/// replace). An entry whose record is gone is skipped, as before.
const OPEN: &str = r"
local t = redis.call('TIME')
local now = math.floor((tonumber(t[1]) * 1000000 + tonumber(t[2])) / 1000)
local now_s = string.format('%.0f', now)
if failed(redis.pcall('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_s)) then
  redis.call('DEL', KEYS[1])
  return {1, {}}
end
local open = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now_s, '+inf', 'WITHSCORES')
local out = {}
for i = 1, #open, 2 do
  local key = open[i]
  local score = tonumber(open[i + 1])
  local left = score and score - now
  local ok, r = false, nil
  if #key > 0 and left and left > 0 and left <= 9007199254740991 then
    local name = ARGV[1] .. key
    local _
    ok, _, _, _, r = record(name)
    if ok == nil and redis.call('EXISTS', name) == 1 then ok = false end
  end
  if ok == false then
    bad = bad + 1
    redis.call('ZREM', KEYS[1], key)
  elseif ok then
    out[#out + 1] = r[1] .. '|' .. string.format('%.0f', left) .. '|' .. r[3] .. '|'
      .. r[4] .. '|' .. r[5] .. '|' .. key
  end
end
return {bad, out}
";

/// A script's Lua source: the prelude, filled in, and its body.
fn source(body: &str) -> String {
    let reasons: Vec<String> = TRIP_REASONS
        .iter()
        .map(|r| format!("['{}'] = true", r.as_str()))
        .collect();
    let prelude = PRELUDE
        .replace("__REASONS__", &reasons.join(", "))
        .replace("__MAX_ORIGIN__", &MAX_ORIGIN_BYTES.to_string());
    format!("{prelude}{body}")
}

/// A Lua script: its source, and the SHA-1 `EVALSHA` names it by.
#[derive(Debug)]
pub(crate) struct Lua {
    code: String,
    hash: String,
}

impl Lua {
    fn new(code: String) -> Lua {
        let hash = Script::new(&code).get_hash().to_owned();
        Lua { code, hash }
    }
}

/// One call of a script: its keys and arguments.
#[derive(Debug)]
pub(crate) struct Call<'a> {
    lua: &'a Lua,
    keys: Vec<String>,
    args: Vec<String>,
}

impl Call<'_> {
    /// `EVALSHA`: the script as the node has it cached. In a cluster it
    /// goes to the node that owns its keys' slot.
    pub(crate) fn by_hash(&self) -> Cmd {
        self.command("EVALSHA", &self.lua.hash)
    }

    /// `EVAL` with the source, after the node answered `NOSCRIPT`: the node
    /// runs and caches it. Never `SCRIPT LOAD`, which a cluster client sends
    /// to every node — one node asleep would hold up every first call.
    pub(crate) fn with_source(&self) -> Cmd {
        self.command("EVAL", &self.lua.code)
    }

    fn command(&self, name: &str, script: &str) -> Cmd {
        let mut cmd = redis::cmd(name);
        cmd.arg(script)
            .arg(self.keys.len())
            .arg(&self.keys)
            .arg(&self.args);
        cmd
    }
}

/// Whether the node answered that it does not have the script.
pub(crate) fn is_noscript(err: &RedisError) -> bool {
    err.kind() == ErrorKind::Server(ServerErrorKind::NoScript)
}

/// Both scripts, called by hash (`EVALSHA`, falling back to `EVAL` once
/// per node that does not have them yet).
#[derive(Debug)]
pub(crate) struct Scripts {
    trip: Lua,
    open: Lua,
}

/// The trip script's answer: bad records it replaced, and the news it
/// published (empty: nothing new).
pub(crate) type TripReply = (u64, String);
/// The reconciliation script's answer: bad records it skipped, and the
/// shard's open trips on the wire.
pub(crate) type OpenReply = (u64, Vec<String>);

impl Scripts {
    pub(crate) fn new() -> Scripts {
        Scripts {
            trip: Lua::new(source(TRIP)),
            open: Lua::new(source(OPEN)),
        }
    }

    /// The trip script's call for `trip` in `shard`.
    pub(crate) fn trip(&self, shard: &Shard, trip: &LocalTrip) -> Call<'_> {
        use crate::share::ceil_millis;
        Call {
            lua: &self.trip,
            keys: vec![
                shard.trip(&trip.key),
                shard.reporters(&trip.key),
                shard.index(),
            ],
            args: vec![
                trip.key.clone(),
                trip.origin.clone(),
                ceil_millis(trip.remaining).max(1).to_string(),
                trip.reason.as_str().to_owned(),
                ceil_millis(trip.slack).to_string(),
                ceil_millis(trip.window).max(1).to_string(),
                shard.channel(),
            ],
        }
    }

    /// The reconciliation script's call for `shard`.
    pub(crate) fn open(&self, shard: &Shard) -> Call<'_> {
        Call {
            lua: &self.open,
            keys: vec![shard.index()],
            args: vec![shard.trip_prefix()],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prelude_names_every_trip_reason_and_the_origin_limit() {
        let lua = source(OPEN);
        assert!(!lua.contains("__"), "every placeholder filled");
        for r in TRIP_REASONS {
            assert!(lua.contains(&format!("['{}'] = true", r.as_str())), "{r:?}");
        }
        assert!(lua.contains(&format!("local MAX_ORIGIN = {MAX_ORIGIN_BYTES}\n")));
    }

    #[test]
    fn a_call_names_its_keys_then_its_arguments() {
        let scripts = Scripts::new();
        let keys = super::super::keys::Keyspace::new("p", 1);
        let call = scripts.open(&keys.shard_at(0));
        let packed = String::from_utf8_lossy(&call.by_hash().get_packed_command()).into_owned();
        let words: Vec<&str> = packed
            .split("\r\n")
            .filter(|w| !w.starts_with(['*', '$']))
            .collect();
        assert_eq!(
            words[..5],
            [
                "EVALSHA",
                scripts.open.hash.as_str(),
                "1",
                "{p:0}:open",
                "{p:0}:trip:"
            ]
        );
        let packed = call.with_source().get_packed_command();
        assert!(String::from_utf8_lossy(&packed).contains("local function record"));
    }
}
