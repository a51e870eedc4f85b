//! The README's first command: the incidents of SCENARIOS.md, side by side,
//! in simulated time.
//!
//! ```sh
//! cargo run --release --example demo                 # S1, S3, S6, S13, recovery, outliers (simulated, a second or two)
//! cargo run --release --example demo -- --load 600   # S1 at another offered load (calls/s)
//! cargo run --release --example demo -- --scene outliers   # one scene (s1, s3, s6, s13, recovery, outliers)
//! cargo run --release --example demo -- --real       # real HTTP through examples/proxy
//! ```
//!
//! Everything runs on a `ManualClock` driven by a small discrete-event
//! simulation (`sim.rs`): no sleep, no thread, deterministic output. Each
//! scenario lives in its own module with its model described at the top.

mod lock_around_call;
mod outliers;
mod real;
mod recovery;
mod s1;
mod s13;
mod s3;
mod s3_budget;
mod s6;
mod sim;
mod table;

use std::process::ExitCode;

const USAGE: &str = "\
usage: demo [--real [--seconds N]] [--scene NAME[,NAME…]] [--load CALLS_PER_S] [--bulkhead N] [--hosts N]

  --real          real HTTP through the per-host proxy (examples/proxy, built with
                  --features tower,serde) and real upstreams on loopback, in real time
  --seconds N     --real: how long to drive traffic (default 15)
  --scene NAMES   only these scenes, comma-separated: s1, s3, s6, s13, recovery, outliers
                  (default all). The outliers scene checks its claims: the demo exits 1 if
                  one fails
  --load N        S1: calls per second offered to the price catalog (default 200)
  --bulkhead N    S1: in-flight cap of the bulkhead in front of failfast (default 20)
  --hosts N       S6: also create N breakers (default 1000000; 0 to skip)";

/// The simulated scenes, in the order they run.
const SCENES: [&str; 6] = ["s1", "s3", "s6", "s13", "recovery", "outliers"];

struct Args {
    real: bool,
    scenes: Vec<String>,
    seconds: u64,
    load: u64,
    bulkhead: usize,
    hosts: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        real: false,
        scenes: SCENES.iter().map(ToString::to_string).collect(),
        seconds: 15,
        load: 200,
        bulkhead: 20,
        hosts: 1_000_000,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| -> Result<u64, String> {
            let v = it.next().ok_or(format!("{name} needs a value"))?;
            v.parse().map_err(|_| format!("{name}: not a number: {v}"))
        };
        match arg.as_str() {
            "--real" => args.real = true,
            "--scene" => {
                let v = it.next().ok_or("--scene needs a value")?;
                args.scenes = v.split(',').map(str::to_string).collect();
                if let Some(bad) = args.scenes.iter().find(|s| !SCENES.contains(&s.as_str())) {
                    return Err(format!("--scene: no scene {bad}"));
                }
            }
            "--seconds" => args.seconds = value("--seconds")?.max(1),
            "--load" => args.load = value("--load")?.max(1),
            "--bulkhead" => args.bulkhead = value("--bulkhead")? as usize,
            "--hosts" => args.hosts = value("--hosts")? as usize,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument: {other}")),
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("{e}");
            }
            eprintln!("{USAGE}");
            return if e.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            };
        }
    };
    if args.real {
        return real::run(args.seconds);
    }
    println!(
        "failfast demo: {} in simulated time (a ManualClock; nothing sleeps).",
        match args.scenes.len() {
            1 => "one incident".to_string(),
            n => format!("{n} incidents"),
        }
    );
    let on = |name: &str| args.scenes.iter().any(|s| s == name);
    if on("s1") {
        s1::show(&s1::Params::new(args.load, args.bulkhead));
    }
    if on("s3") {
        s3::show();
        s3_budget::show();
    }
    if on("s6") {
        s6::show(args.hosts);
    }
    if on("s13") {
        s13::show();
    }
    if on("recovery") {
        recovery::show();
    }
    let held = !on("outliers") || outliers::show();
    println!();
    if held {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
