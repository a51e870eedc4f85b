//! The command line.

use super::*;

/// The usage text, printed by `--help` and after a bad argument.
pub const USAGE: &str = concat!(
    "\
usage: proxy [OPTIONS]

A reverse proxy with one circuit breaker per upstream: GET /NAME/PATH is
forwarded to http://HOST:PORT/PATH. It logs one line per request on stderr,
serves its breakers at /_failfast and, built with the metrics feature,
Prometheus metrics at /metrics; SIGTERM or SIGINT drains it and exits 0.

options:
  --route NAME=HOST:PORT  forward /NAME/... to HOST:PORT; repeat for more
                          routes, each NAME once (letters, digits, - . _ ~);
                          HOST must be loopback (127.0.0.0/8, ::1, localhost)
  --allow-remote-upstreams
                          allow a --route to any other host
  --demo                  start local upstreams and route to them: healthy,
                          slow (800 ms), failing (503), down (refused)
  --listen ADDR           where clients connect [default: 127.0.0.1:8080]
  --admin ADDR            serve /_failfast and /metrics here only
                          [default: on --listen]
  --timeout MS            the call timeout: 504 after this long, counted as
                          a failure. Set it just below your callers' own
                          timeout, so they get an answer they can act on
                          rather than giving up first [default: 900, for
                          callers that wait 1 s, as Hystrix's and
                          Resilience4j's default]
  --body-timeout MS       fail a call whose request body sends nothing this
                          long, as the client's fault (408); shorter than
                          --timeout [default: half of --timeout]
  --config FILE           the breakers, as a TOML file: a [breaker] table
                          (the template every upstream's breaker follows),
                          [hosts.\"HOST:PORT\"] tables (one upstream's own
                          settings) and the registry's settings; the schema
                          is failfast::config::RegistryConfig's
  --breaker KEY=VALUE     set one field of the [breaker] table (after
                          --config); repeat for more, e.g.
                          --breaker slow_call_threshold=2s
                          --breaker open_duration=10s --breaker backoff=off
                          The default [breaker] table (the library's own
                          defaults for every other field: the open period
                          and its backoff, the unanswered rule, the probes):
",
    template_toml!(),
    "  --no-breakers           send every call straight through (the call
                          timeout still applies): to measure what the
                          breakers cost, not to run
  --stale ROUTE           while ROUTE's upstream is open, answer its
                          anonymous GETs with their last good answer,
                          marked stale (x-failfast: fallback, Age); repeat
                          for more routes [default: none: a 503 instead]
  --stale-max-age MS      the oldest such an answer may be [default: 60000]
  --max-in-flight N       calls in flight to one upstream at most; past it,
                          503 with x-failfast: overloaded [default: 1024]
  --drain MS              on SIGTERM or SIGINT, stop accepting and wait this
                          long at most for requests in flight [default: 10000]
  --workers N             threads serving clients, each with its own runtime
                          and upstream connections [default: one per CPU]
  --header-timeout MS     close a connection whose request head is not
                          complete by then [default: 10000]
  --idle-timeout MS       close pooled upstream connections idle this long
                          [default: 30000]
  --status-limit N        upstreams on the status page at most [default: 100]
  --no-access-log         do not log each request
  --redis URL             share trips with other proxies through Redis 7+
                          (redis://HOST:PORT/ or redis+unix:///PATH; needs
                          the example built with --features tower,serde,redis)
  --replica NAME          this proxy's name among them [default: random]
  -h, --help              print this and exit

Listen addresses must be loopback: this is an example.
"
);

/// What the command line asks for.
#[derive(Clone, Debug)]
pub struct Options {
    pub listen: SocketAddr,
    pub admin: Option<SocketAddr>,
    /// Route name → upstream, in name order.
    pub routes: BTreeMap<String, Authority>,
    pub demo: bool,
    pub settings: Settings,
    /// `--config`: the breakers' configuration file.
    pub config: Option<std::path::PathBuf>,
    /// `--breaker KEY=VALUE`, in order.
    pub breaker_sets: Vec<String>,
    /// `--redis`: where trips are shared, and this proxy's name there.
    pub redis: Option<String>,
    pub replica: Option<String>,
    /// `--allow-remote-upstreams`: routes may leave the machine.
    pub remote_upstreams: bool,
}

/// The outcome of parsing the command line.
#[derive(Clone, Debug)]
pub enum Cli {
    Run(Box<Options>),
    Help,
}

/// Parses the arguments (without the program name). `Err` says what is wrong.
pub fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Cli, String> {
    let mut args = args.into_iter();
    let mut options = Options {
        listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
        admin: None,
        routes: BTreeMap::new(),
        demo: false,
        settings: Settings {
            verbose: true,
            access_log: true,
            ..Settings::default()
        },
        config: None,
        breaker_sets: Vec::new(),
        redis: None,
        replica: None,
        remote_upstreams: false,
    };
    let mut body_timeout = None;
    while let Some(arg) = args.next() {
        let mut value = |what: &str| {
            args.next()
                .ok_or_else(|| format!("{arg} needs a value: {arg} {what}"))
        };
        match arg.as_str() {
            "-h" | "--help" => return Ok(Cli::Help),
            "--demo" => options.demo = true,
            "--listen" => options.listen = address(&arg, &value("ADDR")?)?,
            "--admin" => options.admin = Some(address(&arg, &value("ADDR")?)?),
            "--route" => {
                let spec = value("NAME=HOST:PORT")?;
                let (name, to) = route(&spec)?;
                if options.routes.insert(name.to_owned(), to).is_some() {
                    return Err(format!("--route {name} given twice"));
                }
            }
            "--allow-remote-upstreams" => options.remote_upstreams = true,
            "--timeout" => options.settings.timeout = millis(&arg, &value("MS")?)?,
            "--body-timeout" => body_timeout = Some(millis(&arg, &value("MS")?)?),
            "--max-in-flight" => options.settings.max_in_flight = count(&arg, &value("N")?)?,
            "--drain" => options.settings.drain = millis(&arg, &value("MS")?)?,
            "--workers" => options.settings.workers = count(&arg, &value("N")?)?,
            "--header-timeout" => options.settings.header_timeout = millis(&arg, &value("MS")?)?,
            "--idle-timeout" => options.settings.idle_timeout = millis(&arg, &value("MS")?)?,
            "--status-limit" => {
                let n = value("N")?;
                options.settings.status_limit = n
                    .parse()
                    .map_err(|_| format!("--status-limit {n:?}: expected a number"))?;
            }
            "--no-access-log" => options.settings.access_log = false,
            "--config" => options.config = Some(value("FILE")?.into()),
            "--breaker" => options.breaker_sets.push(value("KEY=VALUE")?),
            "--no-breakers" => options.settings.breakers = false,
            "--stale" => options.settings.stale_routes.push(value("ROUTE")?),
            "--stale-max-age" => options.settings.stale_max_age = millis(&arg, &value("MS")?)?,
            "--redis" => options.redis = Some(value("URL")?),
            "--replica" => options.replica = Some(value("NAME")?),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if options.demo {
        for name in DEMO_ROUTES {
            if options.routes.contains_key(name) {
                return Err(format!("--route {name} clashes with --demo's route {name}"));
            }
        }
    } else if options.routes.is_empty() {
        return Err("no routes: give --route NAME=HOST:PORT or --demo".to_owned());
    }
    if !options.remote_upstreams {
        if let Some((name, to)) = options
            .routes
            .iter()
            .find(|(_, to)| !is_loopback_host(to.host()))
        {
            return Err(format!(
                "--route {name}={to}: {} is not a loopback address; this example sends \
                 traffic to this machine only, unless given --allow-remote-upstreams",
                to.host()
            ));
        }
    }
    let timeout = options.settings.timeout;
    options.settings.body_timeout = match body_timeout {
        Some(body) if body >= timeout => {
            return Err("--body-timeout must be shorter than --timeout".to_owned());
        }
        Some(body) => body,
        // The default, kept below the call timeout.
        None => timeout / 2,
    };
    if options.admin == Some(options.listen) && options.listen.port() != 0 {
        return Err("--admin must differ from --listen".to_owned());
    }
    if let Some(route) = options.settings.stale_routes.iter().find(|r| {
        !(options.routes.contains_key(*r) || options.demo && DEMO_ROUTES.contains(&r.as_str()))
    }) {
        return Err(format!("--stale {route}: no such route"));
    }
    // Checked here, so a bad setting is a usage error; built again by `run`.
    breakers(options.config.as_deref(), &options.breaker_sets)?
        .build()
        .map_err(|e| e.to_string())?;
    if options.replica.is_some() && options.redis.is_none() {
        return Err("--replica needs --redis".to_owned());
    }
    if options.redis.is_some() && !cfg!(feature = "redis") {
        return Err(
            "--redis: this build has no Redis support; build with --features tower,redis"
                .to_owned(),
        );
    }
    options.settings.admin_listener = options.admin.is_some();
    options.settings.share_trips = options.redis.is_some();
    Ok(Cli::Run(Box::new(options)))
}

pub(crate) const DEMO_ROUTES: [&str; 4] = ["healthy", "slow", "failing", "down"];

/// `NAME=HOST:PORT`: a name of URI-unreserved characters (it is a path
/// segment, a log field and a metrics label), a host, a port other than 0,
/// no user information.
pub(crate) fn route(spec: &str) -> Result<(&str, Authority), String> {
    let (name, to) = spec
        .split_once('=')
        .filter(|(name, _)| valid_route_name(name))
        .ok_or_else(|| {
            format!("--route {spec:?}: expected NAME=HOST:PORT, NAME of letters, digits, - . _ ~")
        })?;
    let to: Authority = to
        .parse()
        .ok()
        .filter(|a: &Authority| {
            a.port_u16().is_some_and(|port| port != 0)
                && !a.host().is_empty()
                && !a.as_str().contains('@')
        })
        .ok_or_else(|| format!("--route {spec:?}: {to:?} is not HOST:PORT (port 1 to 65535)"))?;
    Ok((name, to))
}

pub(crate) fn valid_route_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
}

/// Whether `host` (an authority's host: a name, an IPv4 address or a
/// bracketed IPv6 one) is this machine's loopback: `localhost`, 127.0.0.0/8
/// or `::1` (also as `::ffff:127.x.y.z`).
pub(crate) fn is_loopback_host(host: &str) -> bool {
    let unbracketed = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    host.trim_end_matches('.').eq_ignore_ascii_case("localhost")
        || unbracketed
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.to_canonical().is_loopback())
}

pub(crate) fn address(flag: &str, s: &str) -> Result<SocketAddr, String> {
    let addr: SocketAddr = s
        .parse()
        .map_err(|_| format!("{flag} {s:?}: expected IP:PORT, e.g. 127.0.0.1:8080"))?;
    if !addr.ip().is_loopback() {
        return Err(format!("{flag} {s}: this example listens on loopback only"));
    }
    Ok(addr)
}

pub(crate) fn millis(flag: &str, s: &str) -> Result<Duration, String> {
    match s.parse::<u64>() {
        Ok(ms) if ms > 0 => Ok(Duration::from_millis(ms)),
        _ => Err(format!("{flag} {s:?}: expected milliseconds, at least 1")),
    }
}

pub(crate) fn count(flag: &str, s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{flag} {s:?}: expected a number, at least 1")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, String> {
        parse_args(args.iter().map(|a| (*a).to_owned()))
    }

    #[test]
    fn workers_are_one_per_cpu_unless_told() {
        let Ok(Cli::Run(options)) = parse(&["--demo"]) else {
            panic!("--demo parses")
        };
        assert_eq!(options.settings.workers, default_workers());
        let Ok(Cli::Run(options)) = parse(&["--demo", "--workers", "3"]) else {
            panic!("--workers 3 parses")
        };
        assert_eq!(options.settings.workers, 3);
        let err = parse(&["--demo", "--workers", "0"]).unwrap_err();
        assert!(err.contains("at least 1"), "{err}");
    }
}
