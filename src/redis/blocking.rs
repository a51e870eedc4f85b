//! [`RedisStore`]: the same two scripts behind the synchronous [`Store`]
//! trait, on a blocking connection to one server.

use core::fmt;

use redis::{Connection, RedisError, RedisResult};

use super::keys::Keyspace;
use super::script::Scripts;
use super::RedisSyncBuilder;
use crate::share::{LocalTrip, News, Store};

/// A single Redis server as a [`Store`], over a blocking connection: for a
/// program without tokio that drives its [`Replica`](crate::share::Replica)
/// from a thread of its own ([`Replica::publish_to`](crate::share::Replica::publish_to),
/// [`Replica::reconcile_with`](crate::share::Replica::reconcile_with)), for
/// tools, and for tests that hold the scripts to the rules of
/// [`MemoryStore`](crate::share::MemoryStore). It records, publishes and
/// lists trips exactly as the sync task does; it does not subscribe (its
/// owner reconciles, or reads the channel itself).
///
/// Built with [`RedisSyncBuilder::connect_blocking`].
pub struct RedisStore {
    conn: Connection,
    keys: Keyspace,
    scripts: Scripts,
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
        })
    }
}

impl Store for RedisStore {
    type Error = RedisError;

    fn trip(&mut self, trip: &LocalTrip) -> RedisResult<Option<News>> {
        let shard = self.keys.shard_of(&trip.key);
        let wire: Option<String> = self.scripts.trip(&shard, trip).invoke(&mut self.conn)?;
        Ok(wire.as_deref().and_then(News::decode))
    }

    fn open_trips(&mut self) -> RedisResult<Vec<News>> {
        let mut open = Vec::new();
        for shard in self.keys.shards() {
            let list: Vec<String> = self.scripts.open(&shard).invoke(&mut self.conn)?;
            open.extend(list.iter().filter_map(|w| News::decode(w)));
        }
        Ok(open)
    }
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("keys", &self.keys)
            .finish_non_exhaustive()
    }
}
