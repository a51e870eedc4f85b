//! The breakers' configuration: the crate's serde config
//! ([`RegistryConfig`](failfast::config::RegistryConfig)) from a TOML file
//! (`--config`), each field of its `[breaker]` table also settable with
//! `--breaker KEY=VALUE`.
//!
//! The proxy's own template sets only the trip conditions; everything else
//! (the open period and its backoff, the unanswered rule,
//! `abandoned_after`, the probes) is the library's default, so the proxy
//! follows the library's choices.

use failfast::config::RegistryConfig;

use super::*;

/// The template's text (a macro, so that `--help` can show it).
macro_rules! template_toml {
    () => {
        "                          failure_rate = 0.5             # open when half the calls fail,
                          slow_call_rate = 0.5           # or half are slow,
                          slow_call_threshold = \"500ms\"  # i.e. take 500 ms or more,
                          count_window = 20              # over the last 20 calls,
                          min_calls = 10                 # once 10 were seen
                          count_calls = true             # (the status page shows the counts)
"
    };
}

/// Every upstream's breaker unless `--config` or `--breaker` say otherwise,
/// as a `[breaker]` table.
pub const TEMPLATE: &str = template_toml!();

/// The default template as a builder.
pub fn template() -> Builder {
    toml::from_str::<failfast::config::BreakerConfig>(TEMPLATE)
        .expect("the template parses")
        .to_builder()
        .expect("the template is valid")
}

/// The registry `file` (TOML) describes, [`TEMPLATE`] as its `[breaker]`
/// table if it has none, with each `KEY=VALUE` of `sets` laid over that
/// table. A value that is not TOML (`2s`, `off`) is taken as text.
pub fn breakers(
    file: Option<&std::path::Path>,
    sets: &[String],
) -> Result<RegistryBuilder<HostKey>, String> {
    let mut table: toml::Table = match file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("--config {}: {e}", path.display()))?;
            text.parse()
                .map_err(|e| format!("--config {}: {e}", path.display()))?
        }
        None => toml::Table::new(),
    };
    if !table.contains_key("breaker") {
        let template: toml::Table = TEMPLATE.parse().expect("the template parses");
        table.insert("breaker".into(), toml::Value::Table(template));
    }
    let Some(toml::Value::Table(breaker)) = table.get_mut("breaker") else {
        return Err("--config: [breaker] must be a table".into());
    };
    for set in sets {
        let (key, value) = set
            .split_once('=')
            .ok_or_else(|| format!("--breaker {set:?}: expected KEY=VALUE"))?;
        let value = format!("v = {value}")
            .parse::<toml::Table>()
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(value.to_owned()));
        breaker.insert(key.trim().to_owned(), value);
    }
    let text = toml::to_string(&table).map_err(|e| e.to_string())?;
    let config: RegistryConfig = toml::from_str(&text).map_err(|e| format!("breakers: {e}"))?;
    config.to_builder::<HostKey>().map_err(|e| e.to_string())
}
