//! Progress bars on standard error (hidden when it is not a terminal or with --quiet).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A bar of `len` steps with a label.
pub fn bar(enabled: bool, len: u64, label: &str) -> ProgressBar {
    let pb = ProgressBar::with_draw_target(
        Some(len),
        if enabled {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        },
    );
    if let Ok(style) =
        ProgressStyle::with_template("{msg:>12} [{bar:40}] {percent:>3}% {elapsed_precise} eta {eta}")
    {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_message(label.to_owned());
    pb
}
