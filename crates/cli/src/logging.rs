//! Structured logs of node processes (`tracing`): human lines or JSON objects on standard
//! error, filtered by `RUST_LOG` (`info` by default; e.g. `RUST_LOG=worldmesh_net=debug`).

use tracing_subscriber::EnvFilter;

use worldmesh::config::LogFormat;

/// Installs the subscriber (once; later calls do nothing).
pub fn init(format: LogFormat) {
    let (filter, bad) = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.trim().is_empty() => match EnvFilter::try_new(&spec) {
            Ok(f) => (f, None),
            Err(e) => (
                EnvFilter::new("info"),
                Some(format!("RUST_LOG `{spec}` ignored: {e}")),
            ),
        },
        _ => (EnvFilter::new("info"), None),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false);
    let _ = match format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    if let Some(msg) = bad {
        tracing::warn!("{msg}");
    }
}
