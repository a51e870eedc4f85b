//! The seeds' incidents, for real: a scheduled catalog and open-loop
//! callers (this process) on loopback, and between them each proxy under
//! test as a process of its own: the failfast proxy example with its
//! defaults, a pingora proxy using failfast (`incident/pingora`), nginx and
//! HAProxy configured as their expert users would (`incident/conf`).
//!
//! ```sh
//! cargo build --release --example proxy --features tower,serde
//! (cd incident/pingora && cargo build --release)      # needs cmake
//! cargo run --release -p failfast-incident            # every scenario, ~18 min
//! cargo run --release -p failfast-incident -- --short --gate   # CI: ~2 min
//! ```
//!
//! See `incident/README.md` for what is measured and how to read it.

mod callers;
mod overhead;
mod proxies;
mod report;
mod summary;
mod upstream;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use proxies::{Kind, Route, Tools};
use summary::Summary;
use tokio::time::Instant;
use upstream::{Mode, Plan};

/// One incident.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: &'static str,
    pub title: String,
    pub mode: Mode,
    /// Upstream hosts; every `sick_every`-th one is sick.
    pub hosts: usize,
    pub sick_every: usize,
    pub rate: f64,
    pub retries: u8,
    pub plan: Plan,
    /// Run its proxies one after another: the refused connects are counted
    /// by the kernel for the whole machine, and 1,000 hosts are heavy.
    pub alone: bool,
}

impl Scenario {
    pub fn counts_refused(&self) -> bool {
        self.mode == Mode::Refused
    }

    fn sick(&self) -> Vec<bool> {
        (0..self.hosts).map(|i| i % self.sick_every == 0).collect()
    }
}

const PATIENCE: Duration = Duration::from_secs(1);

fn scenarios(short: bool) -> Vec<Scenario> {
    // Full: healthy 5 s, a 40 s incident, 25 s to recover (a 40 s incident
    // rather than 30 s: a 30 s one ends just before a 30 s open period's
    // probe, which hides a late schedule). Short (CI): 3 + 20 + 17 s.
    let plan = if short {
        Plan {
            start: 3.0,
            end: 23.0,
            length: 40.0,
        }
    } else {
        Plan {
            start: 5.0,
            end: 45.0,
            length: 70.0,
        }
    };
    let incident = plan.end - plan.start;
    let one = |name, mode, title: &str| Scenario {
        name,
        title: format!(
            "{title}, t = {}–{} s, 100 calls/s, callers give up at 1 s",
            plan.start, plan.end
        ),
        mode,
        hosts: 1,
        sick_every: 1,
        rate: 100.0,
        retries: 0,
        plan,
        alone: mode == Mode::Refused,
    };
    let mut all = vec![
        one("slow", Mode::Slow, "Slow: 200 OK after 8 s (seed 000)"),
        one(
            "fail503",
            Mode::Fail503,
            "Hard down: 503 at once (seed 004)",
        ),
    ];
    if short {
        return all;
    }
    all.extend([
        one(
            "refused",
            Mode::Refused,
            "Hard down: connection refused (seed 004)",
        ),
        one(
            "hang",
            Mode::Hang,
            "Hard down: accepts, never answers (seed 004)",
        ),
        Scenario {
            retries: 3,
            title: format!(
                "Retry storm: slow as in seed 000, each caller retrying 3 times at once \
                 (seed 001), t = {}–{} s, 100 calls/s",
                plan.start, plan.end
            ),
            ..one("retry", Mode::Slow, "")
        },
        Scenario {
            name: "many",
            title: format!(
                "Many hosts: 1,000 upstreams on 127.1.x.y, every 10th one 503 for {incident} s \
                 (seed 002), 500 calls/s spread over all"
            ),
            mode: Mode::Fail503,
            hosts: 1000,
            sick_every: 10,
            rate: 500.0,
            retries: 0,
            plan,
            // One at a time: 5,000 listeners and 2,500 calls/s at once are
            // more than two cores serve on time.
            alone: true,
        },
    ]);
    all
}

struct Args {
    short: bool,
    /// `--overhead ROUNDS`: wrk through each proxy instead of the incidents.
    overhead: Option<u32>,
    gate: bool,
    only_scenarios: Option<Vec<String>>,
    kinds: Vec<Kind>,
    out: PathBuf,
    tools: Tools,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

const USAGE: &str =
    "usage: failfast-incident [--short] [--gate] [--scenarios a,b] [--proxies a,b] \
[--out DIR] [--example PATH] [--pingora PATH]
  --overhead ROUNDS: wrk through each proxy (healthy upstream), interleaved
  scenarios: slow fail503 refused hang retry many (--short: slow fail503)
  proxies: failfast-example failfast-pingora nginx haproxy haproxy-httpchk
           (and failfast-example-off: --no-breakers, for --overhead)";

fn parse_args() -> Result<Args, String> {
    let root = root();
    let mut args = Args {
        short: false,
        overhead: None,
        gate: false,
        only_scenarios: None,
        kinds: Kind::ALL.to_vec(),
        out: root.join("incident/results"),
        tools: Tools {
            example: root.join("target/release/examples/proxy"),
            pingora: root.join("incident/pingora/target/release/failfast-pingora"),
            conf: root.join("incident/conf"),
            timeout_ms: 900,
        },
    };
    let mut out = None;
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--short" => args.short = true,
            "--overhead" => {
                args.overhead = Some(value()?.parse().map_err(|_| "--overhead ROUNDS")?);
            }
            "--gate" => args.gate = true,
            "--scenarios" => {
                args.only_scenarios = Some(value()?.split(',').map(str::to_owned).collect());
            }
            "--proxies" => {
                args.kinds = value()?
                    .split(',')
                    .map(|n| Kind::parse(n).ok_or(format!("unknown proxy {n}")))
                    .collect::<Result<_, _>>()?;
            }
            "--out" => out = Some(PathBuf::from(value()?)),
            "--example" => args.tools.example = PathBuf::from(value()?),
            "--pingora" => args.tools.pingora = PathBuf::from(value()?),
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if args.short && out.is_none() {
        out = Some(root.join("target/incident-short"));
    }
    if let Some(out) = out {
        args.out = out;
    }
    // Absolute: nginx reads paths relative to its prefix.
    std::fs::create_dir_all(&args.out).map_err(|e| format!("--out: {e}"))?;
    args.out = args.out.canonicalize().map_err(|e| format!("--out: {e}"))?;
    Ok(args)
}

fn main() {
    let args = match parse_args() {
        Ok(args) => args,
        Err(err) => {
            if !err.is_empty() {
                eprintln!("error: {err}");
            }
            eprintln!("{USAGE}");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    std::process::exit(runtime.block_on(run(args)));
}

async fn run(args: Args) -> i32 {
    let mut kinds = Vec::new();
    for kind in &args.kinds {
        match args.tools.available(*kind) {
            Ok(()) => kinds.push(*kind),
            Err(why) => eprintln!("skipping {}: {why}", kind.name()),
        }
    }
    if let Some(rounds) = args.overhead {
        // Written before the runs: the load average the runs started in.
        let header = header(&args);
        let text = tokio::task::block_in_place(|| {
            overhead::run(&args.tools, &kinds, rounds, 10, &args.out)
        });
        let load_after = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        let load_after: Vec<&str> = load_after.split_whitespace().take(3).collect();
        let text = format!("{text}\nLoad average after: {}.\n", load_after.join(" "));
        eprintln!("{text}");
        let _ = std::fs::create_dir_all(&args.out);
        let _ = std::fs::write(args.out.join("overhead.md"), format!("{header}{text}"));
        return 0;
    }
    let scenarios: Vec<Scenario> = scenarios(args.short)
        .into_iter()
        .filter(|s| {
            args.only_scenarios
                .as_ref()
                .is_none_or(|only| only.iter().any(|o| o == s.name))
        })
        .collect();
    let started = std::time::Instant::now();
    let mut results = Vec::new();
    let mut text = header(&args);
    let mut failures = Vec::new();
    for scenario in &scenarios {
        eprintln!(
            "== {} ({} proxies{})",
            scenario.name,
            kinds.len(),
            if scenario.alone {
                ", one at a time"
            } else {
                ", at once"
            }
        );
        let rows = if scenario.alone {
            let mut rows = Vec::new();
            for kind in &kinds {
                rows.extend(run_group(scenario, &[*kind], &args).await);
            }
            rows
        } else {
            run_group(scenario, &kinds, &args).await
        };
        let table = report::table(scenario, &rows);
        eprintln!("{table}");
        text.push_str(&table);
        failures.extend(report::gate(scenario, &rows));
        results.push((scenario.clone(), rows));
    }
    text.push_str(&format!(
        "\nThe gate (a failfast proxy lets at most {:.0} % + {} more load reach the sick \
         upstream than the best incumbent, plus {} calls per second of the outage per sick host \
         for the default schedule's probes, and recovers no later than the slowest): {}\n",
        report::MARGIN * 100.0,
        report::SLACK,
        report::PROBES_PER_SECOND,
        if failures.is_empty() {
            "passed".to_owned()
        } else {
            format!("failed:\n- {}", failures.join("\n- "))
        }
    ));
    text.push_str(&format!(
        "\nRun time: {:.0} s\n",
        started.elapsed().as_secs_f64()
    ));
    let _ = std::fs::create_dir_all(&args.out);
    let _ = std::fs::write(args.out.join("report.md"), &text);
    let _ = std::fs::write(args.out.join("timeline.svg"), report::svg(&results));
    eprintln!(
        "wrote {} and timeline.svg ({:.0} s)",
        args.out.join("report.md").display(),
        started.elapsed().as_secs_f64()
    );
    for f in &failures {
        eprintln!("gate: {f}");
    }
    if args.gate && !failures.is_empty() {
        1
    } else {
        0
    }
}

fn header(args: &Args) -> String {
    let sh = |cmd: &str| {
        Command::new("sh")
            .args(["-c", cmd])
            .output()
            .map(|o| {
                let mut s = String::from_utf8_lossy(&o.stdout).into_owned();
                s.push_str(&String::from_utf8_lossy(&o.stderr));
                s.lines().next().unwrap_or_default().trim().to_owned()
            })
            .unwrap_or_default()
    };
    format!(
        "# Incidents through real proxies\n\nfailfast {} ({}), {}; {}; {}; {}. \
         Load average before: {}. Command: `cargo run --release -p failfast-incident --{}`.\n\n",
        sh(&format!(
            "git -C {} rev-parse --short HEAD",
            root().display()
        )),
        sh("date -u +%Y-%m-%dT%H:%MZ"),
        sh("nginx -v"),
        sh("haproxy -v"),
        sh("rustc --version"),
        match (args.overhead, args.short) {
            (Some(_), _) => "overhead runs",
            (None, true) => "short plan",
            (None, false) => "full plan",
        },
        sh("cut -d' ' -f1-3 /proc/loadavg"),
        match args.overhead {
            Some(rounds) => format!(
                " --overhead {rounds} --proxies {}",
                args.kinds
                    .iter()
                    .map(|k| k.name())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            None if args.short => " --short".to_owned(),
            None => String::new(),
        },
    )
}

/// Where a proxy listens, and where its catalog does: each kind its own,
/// so that runs one after another never wait for a port.
fn ports(kind: Kind) -> (u16, u16) {
    let k = Kind::ALL.iter().position(|k| *k == kind).unwrap_or(0) as u16;
    (18000 + 20 * k, 19000 + 20 * k)
}

fn upstream_addrs(scenario: &Scenario, port: u16) -> Vec<SocketAddr> {
    if scenario.hosts == 1 {
        return vec![SocketAddr::from((Ipv4Addr::LOCALHOST, port))];
    }
    (0..scenario.hosts)
        .map(|i| {
            SocketAddr::from((
                Ipv4Addr::new(127, 1, (i / 200) as u8, (i % 200 + 1) as u8),
                port,
            ))
        })
        .collect()
}

fn route_names(scenario: &Scenario) -> Vec<String> {
    if scenario.hosts == 1 {
        vec!["price".to_owned()]
    } else {
        (0..scenario.hosts).map(|i| format!("h{i:04}")).collect()
    }
}

/// Runs `kinds` through `scenario` at once, each with its own catalog.
async fn run_group(scenario: &Scenario, kinds: &[Kind], args: &Args) -> Vec<Summary> {
    let sick = scenario.sick();
    let names = route_names(scenario);
    let scratch = args.out.join("runs").join(scenario.name);
    // The catalogs (healthy until t0 + start), then the proxies, then t0.
    let mut catalogs = Vec::new();
    let mut proxies = Vec::new();
    for kind in kinds {
        let (listen, up) = ports(*kind);
        let addrs = upstream_addrs(scenario, up);
        let catalog = upstream::start(&addrs, &sick, scenario.mode, scenario.plan)
            .await
            .expect("the catalog listens");
        catalogs.push(catalog);
        let routes: Vec<Route> = names
            .iter()
            .zip(&addrs)
            .map(|(name, addr)| Route {
                name: name.clone(),
                upstream: *addr,
            })
            .collect();
        let (kind, tools, run) = (*kind, args.tools.clone(), scratch.join(kind.name()));
        let started = tokio::task::spawn_blocking(move || {
            proxies::start(kind, &tools, &routes, listen, &run)
        })
        .await
        .expect("the start task");
        match started {
            Ok(proxy) => proxies.push(Some(proxy)),
            Err(err) => {
                eprintln!("  {err}");
                proxies.push(None);
            }
        }
    }
    let t0 = Instant::now() + Duration::from_secs(3);
    for catalog in &catalogs {
        catalog.begin(t0);
    }
    if Instant::now() > t0 {
        eprintln!("  warning: the proxies took longer to start than the warm-up");
    }
    // The kernel's refused connects, read at the incident's start and end.
    let refused = scenario.counts_refused().then(|| {
        let plan = scenario.plan;
        tokio::spawn(async move {
            tokio::time::sleep_until(t0 + Duration::from_secs_f64(plan.start)).await;
            let before = summary::attempt_fails();
            tokio::time::sleep_until(t0 + Duration::from_secs_f64(plan.end)).await;
            Some(summary::attempt_fails()? - before?)
        })
    });
    let mut callers = Vec::new();
    for (k, kind) in kinds.iter().enumerate() {
        let (listen, up) = ports(*kind);
        let load = callers::Load {
            rate: scenario.rate,
            seconds: scenario.plan.length,
            patience: PATIENCE,
            retries: scenario.retries,
            urls: names
                .iter()
                .map(|n| format!("http://127.0.0.1:{listen}/{n}/sku/A-1"))
                .collect(),
            spread: scenario.hosts > 1,
            marks: kind.marks(up),
        };
        let live = proxies[k].is_some();
        callers.push(tokio::spawn(async move {
            if live {
                callers::run(load, t0).await
            } else {
                Vec::new()
            }
        }));
    }
    let mut calls = Vec::new();
    for c in callers {
        calls.push(c.await.unwrap_or_default());
    }
    let refused = match refused {
        Some(task) => task.await.ok().flatten(),
        None => None,
    };
    for proxy in proxies.into_iter().flatten() {
        let _ = tokio::task::spawn_blocking(move || proxy.stop()).await;
    }
    let mut rows = Vec::new();
    for ((kind, catalog), calls) in kinds.iter().zip(catalogs).zip(calls) {
        if !calls.is_empty() {
            rows.push(summary::summarise(
                kind.name(),
                kind.is_failfast(),
                &calls,
                &sick,
                &catalog.tally,
                scenario.plan,
                refused,
            ));
        }
        catalog.stop().await;
    }
    rows
}
