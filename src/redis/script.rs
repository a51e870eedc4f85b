//! The two Lua scripts: record a trip (and announce it), list the open trips
//! (reconciliation). They run the rules [`MemoryStore`](crate::share::MemoryStore)
//! runs in process; a test runs both on the same inputs.

use redis::{Script, ScriptInvocation};

use super::keys::Shard;
use crate::share::LocalTrip;

/// Records a local trip, atomically, on the store's clock (`TIME`).
///
/// KEYS: the record (hash), the reporters (sorted set), the shard's index
/// (sorted set) — one hash tag, one slot. ARGV: key, origin, remaining ms,
/// reason, slack ms, window ms, the shard's channel.
///
/// 1. The reporter joins the key's reporters (scored by now); reporters
///    older than the window leave; the set expires with the window.
/// 2. The period ends at now + remaining, or later if the record says so.
///    Nothing later and no more reporters than the record has: nothing is
///    new, the script returns nil and publishes nothing.
/// 3. Else the epoch is the record's + 1 or now in microseconds, whichever
///    is greater: it grows across the record's expiry too, so replicas that
///    remember an older epoch take the news of a new trip.
/// 4. The record `{epoch, until, reporters, reason, origin}` expires with
///    the period plus the slack; the key enters the index scored by the
///    period's end (the index expires with its last period plus the slack).
/// 5. `SPUBLISH` on the shard's channel, with what is *left* of the period
///    (`epoch|remaining_ms|reporters|reason|origin|key`), and returns the
///    same news.
pub(crate) const TRIP: &str = r"
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(now_us / 1000)
local remaining = tonumber(ARGV[3])
local slack = tonumber(ARGV[5])
local window = tonumber(ARGV[6])
redis.call('ZADD', KEYS[2], now, ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
redis.call('PEXPIRE', KEYS[2], window)
local reporters = redis.call('ZCARD', KEYS[2])
local until_ms = now + remaining
local epoch = now_us
local old = redis.call('HMGET', KEYS[1], 'epoch', 'until', 'reporters')
if old[1] then
  local old_until = tonumber(old[2])
  if old_until >= until_ms and tonumber(old[3]) >= reporters then
    return false
  end
  if old_until > until_ms then until_ms = old_until end
  local next_epoch = tonumber(old[1]) + 1
  if next_epoch > epoch then epoch = next_epoch end
end
local left = until_ms - now
local ttl = left + slack
local e = string.format('%.0f', epoch)
redis.call('HSET', KEYS[1], 'epoch', e, 'until', string.format('%.0f', until_ms),
  'reporters', reporters, 'reason', ARGV[4], 'origin', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('ZADD', KEYS[3], until_ms, ARGV[1])
if redis.call('PTTL', KEYS[3]) < ttl then redis.call('PEXPIRE', KEYS[3], ttl) end
local news = e .. '|' .. string.format('%.0f', left) .. '|' .. reporters
  .. '|' .. ARGV[4] .. '|' .. ARGV[2] .. '|' .. ARGV[1]
redis.call('SPUBLISH', ARGV[7], news)
return news
";

/// Lists a shard's open trips, on the store's clock, and trims the ended
/// ones from its index.
///
/// KEYS: the shard's index. ARGV: the prefix of the shard's record keys
/// (the records share the index's hash tag, so they live in its slot).
/// Returns one wire-form news per key still open with a record:
/// `epoch|remaining_ms|reporters|reason|origin|key`.
pub(crate) const OPEN: &str = r"
local t = redis.call('TIME')
local now = math.floor((tonumber(t[1]) * 1000000 + tonumber(t[2])) / 1000)
local now_s = string.format('%.0f', now)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_s)
local open = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now_s, '+inf', 'WITHSCORES')
local out = {}
for i = 1, #open, 2 do
  local r = redis.call('HMGET', ARGV[1] .. open[i], 'epoch', 'reporters', 'reason', 'origin')
  if r[1] then
    out[#out + 1] = r[1] .. '|' .. string.format('%.0f', tonumber(open[i + 1]) - now) .. '|'
      .. r[2] .. '|' .. r[3] .. '|' .. r[4] .. '|' .. open[i]
  end
end
return out
";

/// Both scripts, loaded by hash (`EVALSHA`, falling back to `EVAL` once
/// per node that does not have them yet).
#[derive(Debug)]
pub(crate) struct Scripts {
    trip: Script,
    open: Script,
}

impl Scripts {
    pub(crate) fn new() -> Scripts {
        Scripts {
            trip: Script::new(TRIP),
            open: Script::new(OPEN),
        }
    }

    /// The trip script's call for `trip` in `shard`.
    pub(crate) fn trip(&self, shard: &Shard, trip: &LocalTrip) -> ScriptInvocation<'_> {
        let mut call = self.trip.prepare_invoke();
        call.key(shard.trip(&trip.key))
            .key(shard.reporters(&trip.key))
            .key(shard.index())
            .arg(&trip.key)
            .arg(&trip.origin)
            .arg(crate::share::ceil_millis(trip.remaining).max(1))
            .arg(trip.reason.as_str())
            .arg(crate::share::ceil_millis(trip.slack))
            .arg(crate::share::ceil_millis(trip.window).max(1))
            .arg(shard.channel());
        call
    }

    /// The reconciliation script's call for `shard`.
    pub(crate) fn open(&self, shard: &Shard) -> ScriptInvocation<'_> {
        let mut call = self.open.prepare_invoke();
        call.key(shard.index()).arg(shard.trip_prefix());
        call
    }
}
