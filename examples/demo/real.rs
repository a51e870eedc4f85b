//! `--real`: the same incidents against real servers on loopback.
//!
//! The real setup is the per-host reverse proxy in `examples/proxy.rs` (hyper
//! and tokio, behind the `tower` feature). Until this demo drives it itself,
//! `--real` says how to start it.

use std::process::ExitCode;

pub fn run() -> ExitCode {
    eprintln!(
        "--real runs against a real proxy and real upstreams on loopback.\n\
         The simulated demo does not start them itself yet; run:\n\n    \
         cargo run --release --example proxy --features tower\n"
    );
    ExitCode::from(2)
}
