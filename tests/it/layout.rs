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
        ("the core", "leasehold-core/src/lib.rs"),
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
    found.extend(long_files(&root, "leasehold-core/src", MAX_LINES));
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

/// The core does no I/O, keeps no clock and draws no random numbers: its dependencies are the
/// few that do none of these (`cargo tree -p leasehold-core -e normal` shows the whole tree;
/// .ci/run checks it for the runtime, the SDK, HTTP and the OS), and it forbids `unsafe`.
#[test]
fn the_core_depends_on_nothing_that_does_io() {
    let root = workspace_root();
    let manifest = std::fs::read_to_string(root.join("leasehold-core/Cargo.toml")).unwrap();
    let manifest: toml::Table = manifest.parse().unwrap();
    let deps: Vec<&String> = manifest["dependencies"]
        .as_table()
        .unwrap()
        .keys()
        .collect();
    println!("the core's dependencies: {deps:?}");
    assert!(!deps.is_empty(), "the manifest was read");
    let allowed = ["humantime", "thiserror"];
    let others: Vec<&&String> = deps
        .iter()
        .filter(|d| !allowed.contains(&d.as_str()))
        .collect();
    assert!(
        others.is_empty(),
        "leasehold-core depends on {others:?}: the core takes no dependency that does I/O, keeps \
         time or draws random numbers (docs/development.md, \"The core and the shell\")"
    );
    let lib = std::fs::read_to_string(root.join("leasehold-core/src/lib.rs")).unwrap();
    assert!(lib.contains("#![forbid(unsafe_code)]"));
}
