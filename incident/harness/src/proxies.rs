//! The proxies under test, each a process of its own, started with its
//! configuration and stopped by its PID.

use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::callers::Marks;

/// A proxy the harness can run.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `examples/proxy`, with its defaults.
    Failfast,
    /// The same with `--no-breakers` (the overhead runs only).
    FailfastOff,
    /// `incident/pingora`: the README's pingora recipe.
    Pingora,
    /// nginx with `conf/nginx.conf`.
    Nginx,
    /// HAProxy with `conf/haproxy.cfg` (observe layer7 + TCP check).
    Haproxy,
    /// The same with an HTTP health check.
    HaproxyHttpchk,
}

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::Failfast,
        Kind::Pingora,
        Kind::Nginx,
        Kind::Haproxy,
        Kind::HaproxyHttpchk,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Failfast => "failfast-example",
            Kind::FailfastOff => "failfast-example-off",
            Kind::Pingora => "failfast-pingora",
            Kind::Nginx => "nginx",
            Kind::Haproxy => "haproxy",
            Kind::HaproxyHttpchk => "haproxy-httpchk",
        }
    }

    /// A failfast proxy (the CI gate compares these with the others).
    pub fn is_failfast(self) -> bool {
        matches!(self, Kind::Failfast | Kind::Pingora)
    }

    pub fn parse(name: &str) -> Option<Kind> {
        Kind::ALL
            .into_iter()
            .chain([Kind::FailfastOff])
            .find(|k| k.name() == name)
    }

    pub fn marks(self, upstream_port: u16) -> Marks {
        match self {
            Kind::Failfast | Kind::FailfastOff | Kind::Pingora => Marks::Failfast,
            Kind::Nginx => Marks::Nginx { upstream_port },
            Kind::Haproxy | Kind::HaproxyHttpchk => Marks::Haproxy,
        }
    }
}

/// Where the binaries and configurations are.
#[derive(Clone, Debug)]
pub struct Tools {
    pub example: PathBuf,
    pub pingora: PathBuf,
    pub conf: PathBuf,
    /// The upstream read timeout nginx, HAProxy and pingora get (ms).
    pub timeout_ms: u64,
}

impl Tools {
    /// Whether `kind` can run here (its binary exists), or why not.
    pub fn available(&self, kind: Kind) -> Result<(), String> {
        let need = |path: &Path| {
            if path.exists() {
                Ok(())
            } else {
                Err(format!("{} not found", path.display()))
            }
        };
        let on_path = |cmd: &str| {
            let found = Command::new("sh")
                .args(["-c", &format!("command -v {cmd}")])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if found {
                Ok(())
            } else {
                Err(format!("{cmd} not installed"))
            }
        };
        match kind {
            Kind::Failfast | Kind::FailfastOff => need(&self.example),
            Kind::Pingora => need(&self.pingora),
            Kind::Nginx => on_path("nginx"),
            Kind::Haproxy | Kind::HaproxyHttpchk => on_path("haproxy"),
        }
    }
}

/// A route: its name (the path's first segment) and its upstream.
pub struct Route {
    pub name: String,
    pub upstream: SocketAddr,
}

/// A running proxy.
pub struct Proxy {
    pub kind: Kind,
    child: Child,
}

/// Starts `kind` listening on `listen` (and `listen + 1`, `+ 2` for its
/// admin or backup listener), logging into `run`.
pub fn start(
    kind: Kind,
    tools: &Tools,
    routes: &[Route],
    listen: u16,
    run: &Path,
) -> std::io::Result<Proxy> {
    fs::create_dir_all(run)?;
    let log = fs::File::create(run.join("proxy.log"))?;
    let mut command = match kind {
        Kind::Failfast | Kind::FailfastOff => {
            // Its defaults: only where to listen and where to route.
            let mut c = Command::new(&tools.example);
            if kind == Kind::FailfastOff {
                c.arg("--no-breakers");
            }
            c.args(["--listen", &format!("127.0.0.1:{listen}")])
                .args(["--admin", &format!("127.0.0.1:{}", listen + 1)]);
            for r in routes {
                c.args(["--route", &format!("{}={}", r.name, r.upstream)]);
            }
            c
        }
        Kind::Pingora => {
            let mut c = Command::new(&tools.pingora);
            c.args(["--listen", &format!("127.0.0.1:{listen}")])
                .args(["--timeout", &tools.timeout_ms.to_string()]);
            for r in routes {
                c.args(["--route", &format!("{}={}", r.name, r.upstream)]);
            }
            c
        }
        Kind::Nginx => {
            fs::create_dir_all(run.join("tmp"))?;
            let conf = nginx_conf(tools, routes, listen, run)?;
            let path = run.join("nginx.conf");
            fs::write(&path, conf)?;
            let mut c = Command::new("nginx");
            c.arg("-p").arg(run).arg("-e").arg(run.join("error.log"));
            c.arg("-c").arg(&path).args(["-g", "daemon off;"]);
            c
        }
        Kind::Haproxy | Kind::HaproxyHttpchk => {
            let conf = haproxy_conf(tools, routes, listen, kind == Kind::HaproxyHttpchk)?;
            let path = run.join("haproxy.cfg");
            fs::write(&path, conf)?;
            let mut c = Command::new("haproxy");
            c.arg("-db").arg("-f").arg(&path);
            c
        }
    };
    let child = command
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?;
    let mut proxy = Proxy { kind, child };
    if !wait_port(listen, Duration::from_secs(20), &mut proxy.child) {
        proxy.stop();
        return Err(std::io::Error::other(format!(
            "{} did not listen on {listen}; see {}",
            kind.name(),
            run.join("proxy.log").display()
        )));
    }
    Ok(proxy)
}

impl Proxy {
    /// Its process id (nginx: the master's; its workers are its children).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM (nginx's master then stops its workers), then SIGKILL if it
    /// is still there after 5 s.
    pub fn stop(mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        for _ in 0..100 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("  {} (pid {pid}) did not stop: SIGKILL", self.kind.name());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `port` takes connections within `within` (`false` at once if
/// the process exits).
fn wait_port(port: u16, within: Duration, child: &mut Child) -> bool {
    let deadline = std::time::Instant::now() + within;
    while std::time::Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

pub fn read(tools: &Tools, name: &str) -> std::io::Result<String> {
    fs::read_to_string(tools.conf.join(name))
}

fn nginx_conf(tools: &Tools, routes: &[Route], listen: u16, run: &Path) -> std::io::Result<String> {
    let backup = (listen + 2).to_string();
    let route = read(tools, "nginx-route.conf")?;
    let mut upstreams = String::new();
    let mut locations = String::new();
    for r in routes {
        upstreams.push_str(
            &route
                .replace("@NAME@", &r.name)
                .replace("@UPSTREAM@", &r.upstream.to_string())
                .replace("@BACKUP@", &backup),
        );
        locations.push_str(&format!(
            "        location /{0}/ {{ proxy_pass http://{0}/; }}\n",
            r.name
        ));
    }
    Ok(read(tools, "nginx.conf")?
        .replace("@UPSTREAMS@", &upstreams)
        .replace("@LOCATIONS@", &locations)
        .replace("@RUN@", &run.display().to_string())
        .replace("@LISTEN@", &listen.to_string())
        .replace("@BACKUP@", &backup)
        .replace("@TIMEOUT@", &format!("{}ms", tools.timeout_ms)))
}

fn haproxy_conf(
    tools: &Tools,
    routes: &[Route],
    listen: u16,
    httpchk: bool,
) -> std::io::Result<String> {
    let check = if httpchk {
        "    option httpchk GET /health\n    http-check expect status 200\n    timeout check 500ms"
    } else {
        ""
    };
    let route = read(tools, "haproxy-route.cfg")?;
    let mut backends = String::new();
    for r in routes {
        backends.push_str(
            &route
                .replace("@NAME@", &r.name)
                .replace("@UPSTREAM@", &r.upstream.to_string())
                .replace("@HTTPCHK@", check),
        );
    }
    Ok(read(tools, "haproxy.cfg")?
        .replace("@BACKENDS@", &backends)
        .replace("@LISTEN@", &listen.to_string())
        .replace("@TIMEOUT@", &format!("{}ms", tools.timeout_ms)))
}
