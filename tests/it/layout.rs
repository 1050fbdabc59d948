//! The shape of the code (docs/development.md, "Layout"): in the crate (`src/`) and in the test
//! kit (`testkit/src/`), no import circles and no imports running back up to an ancestor's own
//! file (`lib.rs`, a `mod.rs`, `a.rs` for `a/b.rs`); no file in `src/` over 800 lines. The
//! reading of the source is the kit's (`testkit/src/layout.rs`, whose own tests show on
//! made-up crates that it finds each of them).
//!
//! `cargo test --test it layout -- --nocapture` prints every arrow and every finding.

use leasehold_testkit::layout::{Finding, Layout, long_files};
use leasehold_testkit::workspace_root;

/// The most lines a file in `src/` may have.
const MAX_LINES: usize = 800;

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
    println!("{} findings:", found.len());
    for f in &found {
        println!("  {f}");
    }
    let found: Vec<String> = found.iter().map(|f| f.to_string()).collect();
    assert!(
        found.is_empty(),
        "the layout broke its rules:\n  {}",
        found.join("\n  ")
    );
}
