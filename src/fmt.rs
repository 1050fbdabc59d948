//! Text for people: durations as logs, `status` and error lines show them, and `status`'s
//! tables.

use std::time::Duration;

/// A duration for people: millisecond precision, humantime format ("4s 120ms").
pub(crate) fn human(d: Duration) -> String {
    humantime::format_duration(Duration::from_millis(d.as_millis() as u64)).to_string()
}

/// Rows as `status` prints a table: each cell padded to its column's widest, two spaces between
/// columns, each line indented by two and ending in a newline, no trailing spaces.
#[cfg(feature = "daemon")]
pub(crate) fn columns<const N: usize>(rows: &[[String; N]]) -> String {
    let widths: Vec<usize> = (0..N)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out += &format!("  {}\n", cells.join("  ").trim_end());
    }
    out
}
