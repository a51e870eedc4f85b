//! Real `redis-server` processes for the Redis tests: one on a unix socket in
//! a temporary directory, or three cluster nodes on loopback ports. Nothing
//! is saved (`--save "" --appendonly no`); each is shut down on drop.
//!
//! Without `redis-server` on the PATH a test calls [`Server::start`], gets
//! `None`, prints (once, past the test harness's capture) that it was
//! skipped and how to run it, and passes — unless `FAILFAST_REQUIRE_REDIS=1`
//! (set by `.ci/run`), which makes a missing server a failure.

#![allow(dead_code)] // Each test file uses part of it.

pub mod node;

use std::io::Write;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Once;
use std::time::{Duration, Instant};

/// Whether a missing server fails the tests.
const REQUIRE: &str = "FAILFAST_REQUIRE_REDIS";

/// Whether `redis-server` can run here; `false` prints the skip notice (or
/// panics when the environment requires the server).
pub fn available() -> bool {
    let found = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if found {
        return true;
    }
    if std::env::var(REQUIRE).is_ok_and(|v| v == "1") {
        panic!("redis-server is not on the PATH and {REQUIRE}=1: install it (apt-get install -y redis-server)");
    }
    static NOTICE: Once = Once::new();
    NOTICE.call_once(|| {
        // Written to the process's stderr directly: the harness captures
        // `eprintln!` of passing tests, not this.
        let _ = writeln!(
            std::io::stderr(),
            "\nnote: the Redis tests were SKIPPED: redis-server (7 or later) is not on the PATH.\n\
             \x20     Install it (apt-get install -y redis-server) to run them;\n\
             \x20     {REQUIRE}=1 makes a missing server a failure (as in .ci/run).\n"
        );
    });
    false
}

/// A fresh temporary directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "ff-redis-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("temporary directory");
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Where a server listens.
#[derive(Clone, Debug)]
enum Addr {
    Unix(PathBuf),
    Port(u16),
}

/// One `redis-server` process.
pub struct Server {
    child: Option<Child>,
    addr: Addr,
    extra: Vec<String>,
    dir: TempDir,
}

impl Server {
    /// A server on a unix socket (no TCP port), with `DEBUG` allowed from
    /// local clients; `None` (and the skip notice) without `redis-server`.
    pub fn start() -> Option<Server> {
        if !available() {
            return None;
        }
        let dir = TempDir::new();
        let socket = dir.0.join("r.sock");
        let mut server = Server {
            child: None,
            addr: Addr::Unix(socket),
            extra: Vec::new(),
            dir,
        };
        server.spawn();
        Some(server)
    }

    /// A cluster node on a free loopback port (and its bus port + 10000).
    fn cluster_node() -> Server {
        let dir = TempDir::new();
        let port = free_port_pair();
        let mut server = Server {
            child: None,
            addr: Addr::Port(port),
            extra: vec![
                "--cluster-enabled".into(),
                "yes".into(),
                "--cluster-config-file".into(),
                dir.0.join("nodes.conf").display().to_string(),
                "--cluster-node-timeout".into(),
                "2000".into(),
            ],
            dir,
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        let mut cmd = Command::new("redis-server");
        cmd.args([
            "--save",
            "",
            "--appendonly",
            "no",
            "--enable-debug-command",
            "local",
        ])
        .arg("--dir")
        .arg(&self.dir.0)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        match &self.addr {
            Addr::Unix(path) => {
                cmd.args(["--port", "0", "--unixsocket"]).arg(path);
            }
            Addr::Port(port) => {
                cmd.args(["--bind", "127.0.0.1", "--port", &port.to_string()]);
            }
        }
        cmd.args(&self.extra);
        self.child = Some(cmd.spawn().expect("redis-server starts"));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut c) = self.connection() {
                if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not answer PING in 10 s"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The URL a client connects with.
    pub fn url(&self) -> String {
        match &self.addr {
            Addr::Unix(path) => format!("redis+unix://{}", path.display()),
            Addr::Port(port) => format!("redis://127.0.0.1:{port}/"),
        }
    }

    /// A plain (blocking) connection for the test's own commands.
    pub fn connection(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(self.url().as_str())?.get_connection()
    }

    /// Runs one command and returns its reply.
    pub fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> T {
        let mut c = self.connection().expect("connects");
        cmd.query(&mut c).expect("command succeeds")
    }

    /// Puts the server to sleep for `seconds` (`DEBUG SLEEP`, on a thread of
    /// its own, which the caller joins) and returns once it sleeps: when a
    /// `PING` on a connection made beforehand goes unanswered for 100 ms.
    pub async fn sleep(&self, seconds: f64) -> std::thread::JoinHandle<()> {
        // Connected before the server sleeps (a handshake would wait for it).
        let mut probe = self.connection().unwrap();
        probe
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let url = self.url();
        let sleeper = std::thread::spawn(move || {
            let mut c = redis::Client::open(url.as_str())
                .unwrap()
                .get_connection()
                .unwrap();
            let _: () = redis::cmd("DEBUG")
                .arg("SLEEP")
                .arg(seconds)
                .query(&mut c)
                .unwrap();
        });
        let unanswered = || redis::cmd("PING").query::<String>(&mut probe).is_err();
        let sleeping = within(Duration::from_secs(2), unanswered).await;
        assert!(sleeping.is_some(), "DEBUG SLEEP took hold");
        sleeper
    }

    /// The number of keys (`DBSIZE`).
    pub fn dbsize(&self) -> u64 {
        self.query(&redis::cmd("DBSIZE"))
    }

    /// `SHUTDOWN NOSAVE`, and waits for the process to exit.
    pub fn shutdown(&mut self) {
        if let Ok(mut c) = self.connection() {
            let _ = redis::cmd("SHUTDOWN").arg("NOSAVE").exec(&mut c);
        }
        if let Some(mut child) = self.child.take() {
            let deadline = Instant::now() + Duration::from_secs(5);
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again, empty, at the same address.
    pub fn restart(&mut self) {
        self.shutdown();
        if let Addr::Unix(path) = &self.addr {
            let _ = std::fs::remove_file(path);
        }
        self.spawn();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A port whose cluster bus port (+10000) is free too.
fn free_port_pair() -> u16 {
    for _ in 0..100 {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        if port > 55_000 {
            continue;
        }
        if TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
    panic!("no free port pair on loopback");
}

/// Three master nodes on loopback ports, slots split evenly.
pub struct Cluster {
    pub nodes: Vec<Server>,
}

impl Cluster {
    /// The cluster, once every node reports `cluster_state:ok`; `None`
    /// (and the skip notice) without `redis-server`.
    pub fn start() -> Option<Cluster> {
        if !available() {
            return None;
        }
        let nodes: Vec<Server> = (0..3).map(|_| Server::cluster_node()).collect();
        let ranges = [(0, 5460), (5461, 10922), (10923, 16383)];
        for (node, (from, to)) in nodes.iter().zip(ranges) {
            let _: () = node.query(redis::cmd("CLUSTER").arg("ADDSLOTSRANGE").arg(from).arg(to));
        }
        for node in &nodes[1..] {
            let Addr::Port(port) = node.addr else {
                unreachable!()
            };
            let _: () =
                nodes[0].query(redis::cmd("CLUSTER").arg("MEET").arg("127.0.0.1").arg(port));
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ok = nodes.iter().all(|n| {
                let info: String = n.query(redis::cmd("CLUSTER").arg("INFO"));
                info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:3")
            });
            if ok {
                return Some(Cluster { nodes });
            }
            assert!(
                Instant::now() < deadline,
                "the cluster did not form in 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Every node's URL.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(Server::url).collect()
    }
}

/// Polls `done` every millisecond until it holds (`Some(elapsed)`) or
/// `limit` passed (`None`).
pub async fn within(limit: Duration, mut done: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    loop {
        if done() {
            return Some(start.elapsed());
        }
        if start.elapsed() > limit {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// The shard (of `shards`) the sync task files `key` under: FNV-1a of its
/// bytes, as `src/redis/keys.rs` computes it (pinned there by a vector).
pub fn shard_of(key: &str, shards: u16) -> u16 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % u64::from(shards)) as u16
}

/// The first key `{prefix}{i}:80` whose shard (of `shards`) is `shard`.
pub fn key_in_shard(prefix: &str, shard: u16, shards: u16) -> String {
    (0..)
        .map(|i| format!("{prefix}{i}:80"))
        .find(|k| shard_of(k, shards) == shard)
        .expect("some key lands in every shard")
}
