//! The shape of the code (docs/development.md, "Layout"): in the crate (`src/`) and in the test
//! kit (`testkit/src/`), no import circles and no imports running back up to an ancestor's own
//! file (`lib.rs`, a `mod.rs`, `a.rs` for `a/b.rs`); no file in `src/` over 800 lines. The
//! reading of the source is the kit's (`testkit/src/layout.rs`, whose own tests show on
//! made-up crates that it finds each of them).
//!
//! `cargo test --test it layout -- --nocapture` prints every arrow and every finding.

use leasehold_testkit::layout::{Finding, Layout, long_files};
use leasehold_testkit::workspace_root;
use std::collections::BTreeSet;

/// The most lines a file in `src/` may have.
const MAX_LINES: usize = 800;

/// Findings in the elector and the simulator (`src/elector/`, `src/sim/`), which are being
/// rewritten as state machines (issue 28), each as [`Finding::key`] writes it. The list can
/// only shrink: a finding missing from it fails the test, and so does an entry that no longer
/// matches a finding. Every file an entry names is in those two folders.
const ALLOWED: &[&str] = &[
    // The elector's files and the simulator import each other: members <-> slots (`Line`,
    // `Place`, `SlotRow`, `pollers`), the elector's files <-> its mod.rs (below), and
    // wake.rs -> sim/mod.rs (`sim::active`, which could ask `crate::random::seeded` as the
    // store does) while the simulator imports the elector.
    "circle src/elector/campaign.rs src/elector/handoff.rs src/elector/keep.rs src/elector/members.rs src/elector/mod.rs src/elector/observe.rs src/elector/preempt.rs src/elector/slots.rs src/elector/task.rs src/elector/term.rs src/elector/vanish.rs src/elector/wake.rs src/sim/body.rs src/sim/mod.rs src/sim/world.rs",
    // elector/mod.rs defines `Elector`, `timed`, `term_span`, `Surrender`,
    // `longest_error_backoff`, which these files use.
    "climb src/elector/campaign.rs -> src/elector/mod.rs",
    "climb src/elector/handoff.rs -> src/elector/mod.rs",
    "climb src/elector/keep.rs -> src/elector/mod.rs",
    "climb src/elector/members.rs -> src/elector/mod.rs",
    "climb src/elector/slots.rs -> src/elector/mod.rs",
    "climb src/elector/vanish.rs -> src/elector/mod.rs",
    // Over 800 lines.
    "long src/elector/campaign.rs",
    "long src/elector/handoff.rs",
    "long src/elector/members.rs",
    "long src/elector/mod.rs",
    "long src/sim/world.rs",
];

#[test]
fn no_import_circles_no_climbs_no_long_files() {
    let root = workspace_root();
    let mut found: Vec<Finding> = Vec::new();
    for (name, lib) in [
        ("the crate", "src/lib.rs"),
        ("the test kit", "testkit/src/lib.rs"),
    ] {
        let layout = Layout::read(&root, lib);
        let arrows = layout.arrows();
        println!(
            "{name}: {} module files, {} arrows",
            layout.uses.len(),
            arrows.len()
        );
        for arrow in &arrows {
            println!("  {arrow}");
        }
        assert!(
            layout.unresolved.is_empty(),
            "{name}: paths the layout check cannot follow (teach testkit/src/layout.rs, or write \
             them plainly): {:#?}",
            layout.unresolved
        );
        found.extend(layout.findings());
    }
    found.extend(long_files(&root, "src", MAX_LINES));
    println!("{} findings, {} allowed:", found.len(), ALLOWED.len());
    for f in &found {
        println!("  {f}");
    }

    let ours = |file: &str| file.starts_with("src/elector/") || file.starts_with("src/sim/");
    for entry in ALLOWED {
        let files = entry.split_whitespace().filter(|w| w.ends_with(".rs"));
        assert!(
            files.clone().count() > 0 && files.clone().all(ours),
            "ALLOWED may only hold findings of src/elector/ and src/sim/: {entry}"
        );
    }
    let keys: BTreeSet<String> = found.iter().map(Finding::key).collect();
    let allowed: BTreeSet<String> = ALLOWED.iter().map(|s| s.to_string()).collect();
    let new: Vec<String> = found
        .iter()
        .filter(|f| !allowed.contains(&f.key()))
        .map(|f| format!("{f}\n    (key: {})", f.key()))
        .collect();
    let gone: Vec<&String> = allowed.difference(&keys).collect();
    assert!(
        new.is_empty() && gone.is_empty(),
        "the layout broke its rules:\n  {}\nentries of ALLOWED that no longer match a finding \
         (remove them): {gone:?}",
        new.join("\n  ")
    );
}
