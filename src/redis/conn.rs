//! The task's one connection: to a single server (a reconnecting
//! multiplexed connection) or to a Redis Cluster (one per node), RESP3, so
//! sharded pub/sub messages arrive on it as pushes.

use core::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::{
    Client, Cmd, ConnectionInfo, FromRedisValue, IntoConnectionInfo, ProtocolVersion, PushInfo,
    RedisResult,
};
use tokio::sync::mpsc::UnboundedSender;

use super::script::{is_noscript, Call};

/// Where the shared state lives.
#[derive(Clone, Debug)]
pub(crate) enum Target {
    Single(ConnectionInfo),
    Cluster(Vec<ConnectionInfo>),
}

/// Parses `url` as a connection target, RESP3.
pub(crate) fn parse(url: &str) -> RedisResult<ConnectionInfo> {
    let info = url.into_connection_info()?;
    let settings = info
        .redis_settings()
        .clone()
        .set_protocol(ProtocolVersion::RESP3);
    Ok(info.set_redis_settings(settings))
}

/// A live connection (multiplexed: its clones share it).
#[derive(Clone)]
pub(crate) enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl Conn {
    /// Connects to `target`, pushes (messages, disconnections) to `pushes`.
    /// Every operation gives up after `timeout`.
    pub(crate) async fn open(
        target: &Target,
        pushes: UnboundedSender<PushInfo>,
        timeout: Duration,
    ) -> RedisResult<Conn> {
        match target {
            Target::Single(info) => {
                let config = ConnectionManagerConfig::new()
                    .set_push_sender(pushes)
                    .set_connection_timeout(Some(timeout))
                    .set_response_timeout(Some(timeout))
                    // The task retries on its own schedule: one quick retry here.
                    .set_number_of_retries(1);
                let client = Client::open(info.clone())?;
                Ok(Conn::Single(ConnectionManager::new_lazy_with_config(
                    client, config,
                )?))
            }
            Target::Cluster(nodes) => {
                let client = ClusterClientBuilder::new(nodes.clone())
                    .use_protocol(ProtocolVersion::RESP3)
                    .push_sender(pushes)
                    .connection_timeout(timeout)
                    .response_timeout(timeout)
                    .retries(2)
                    .build()?;
                Ok(Conn::Cluster(client.get_async_connection().await?))
            }
        }
    }

    /// Runs a script: by its hash, or with its source on a node that does
    /// not have it yet.
    pub(crate) async fn invoke<T: FromRedisValue>(&mut self, call: &Call<'_>) -> RedisResult<T> {
        match self.query(&call.by_hash()).await {
            Err(e) if is_noscript(&e) => self.query(&call.with_source()).await,
            done => done,
        }
    }

    async fn query<T: FromRedisValue>(&mut self, cmd: &Cmd) -> RedisResult<T> {
        match self {
            Conn::Single(c) => cmd.query_async(c).await,
            Conn::Cluster(c) => cmd.query_async(c).await,
        }
    }

    /// Subscribes to a sharded channel (on the node that owns its slot).
    pub(crate) async fn ssubscribe(&mut self, channel: &str) -> RedisResult<()> {
        match self {
            Conn::Single(c) => redis::cmd("SSUBSCRIBE").arg(channel).exec_async(c).await,
            Conn::Cluster(c) => c.ssubscribe(channel).await,
        }
    }
}
