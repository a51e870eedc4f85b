//! [`RedisStore`]: the same two scripts behind the synchronous [`Store`]
//! trait, on a blocking connection to one server.

use core::fmt;

use redis::{Connection, RedisError, RedisResult};

use super::keys::Keyspace;
use super::script::{is_noscript, Call, OpenReply, Scripts, TripReply};
use super::RedisSyncBuilder;
use crate::share::{LocalTrip, News, Store};

/// A single Redis server as a [`Store`], over a blocking connection: for a
/// program without tokio that drives its [`Replica`](crate::share::Replica)
/// from a thread of its own ([`Replica::publish_to`](crate::share::Replica::publish_to),
/// [`Replica::reconcile_with`](crate::share::Replica::reconcile_with)), for
/// tools, and for tests that hold the scripts to the rules of
/// [`MemoryStore`](crate::share::MemoryStore). It records, publishes and
/// lists trips exactly as the sync task does; it does not subscribe (its
/// owner reconciles, or reads the channel itself). Bad records the scripts
/// set aside are counted for [`Store::take_bad_records`]. Unlike the sync
/// task, it stops at the first shard whose script fails.
///
/// Built with [`RedisSyncBuilder::connect_blocking`].
pub struct RedisStore {
    conn: Connection,
    keys: Keyspace,
    scripts: Scripts,
    bad: u64,
}

impl RedisSyncBuilder {
    /// Connects a [`RedisStore`] now, with this builder's server (not a
    /// cluster), prefix, shards and timeout.
    ///
    /// # Errors
    ///
    /// The URL does not parse, the builder names a cluster, or the server
    /// cannot be reached.
    pub fn connect_blocking(&self) -> RedisResult<RedisStore> {
        if self.cluster || self.urls.len() != 1 {
            return Err(RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "a RedisStore connects to a single server",
            )));
        }
        let info = redis::IntoConnectionInfo::into_connection_info(self.urls[0].as_str())?;
        let conn = redis::Client::open(info)?.get_connection_with_timeout(self.timeout)?;
        conn.set_read_timeout(Some(self.timeout))?;
        conn.set_write_timeout(Some(self.timeout))?;
        Ok(RedisStore {
            conn,
            keys: Keyspace::new(&self.prefix, self.shards.max(1)),
            scripts: Scripts::new(),
            bad: 0,
        })
    }
}

impl Store for RedisStore {
    type Error = RedisError;

    fn trip(&mut self, trip: &LocalTrip) -> RedisResult<Option<News>> {
        let shard = self.keys.shard_of(&trip.key);
        let (bad, wire): TripReply = invoke(&mut self.conn, &self.scripts.trip(&shard, trip))?;
        self.bad += bad;
        Ok(News::decode(&wire))
    }

    fn open_trips(&mut self) -> RedisResult<Vec<News>> {
        let mut open = Vec::new();
        for shard in self.keys.shards() {
            let (bad, list): OpenReply = invoke(&mut self.conn, &self.scripts.open(&shard))?;
            self.bad += bad;
            for wire in &list {
                match News::decode(wire) {
                    Some(news) => open.push(news),
                    None => self.bad += 1,
                }
            }
        }
        Ok(open)
    }

    fn take_bad_records(&mut self) -> u64 {
        core::mem::take(&mut self.bad)
    }
}

/// Runs a script: by its hash, or with its source if the server does not
/// have it yet.
fn invoke<T: redis::FromRedisValue>(conn: &mut Connection, call: &Call<'_>) -> RedisResult<T> {
    match call.by_hash().query(conn) {
        Err(e) if is_noscript(&e) => call.with_source().query(conn),
        done => done,
    }
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("keys", &self.keys)
            .finish_non_exhaustive()
    }
}
