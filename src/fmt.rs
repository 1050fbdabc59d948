//! Text for people: durations as logs, `status` and error lines show them.

use std::time::Duration;

/// A duration for people: millisecond precision, humantime format ("4s 120ms").
pub(crate) fn human(d: Duration) -> String {
    humantime::format_duration(Duration::from_millis(d.as_millis() as u64)).to_string()
}
