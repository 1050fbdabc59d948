//! The documentation holds together: every relative link in README.md and docs/*.md points at a
//! file that exists and, with a `#fragment`, at a heading that file has (GitHub's anchors).

use leasehold_testkit::workspace_root;
use pulldown_cmark::{Event, Parser, Tag, TagEnd};
use std::collections::BTreeSet;
use std::path::PathBuf;

/// The anchors GitHub makes of a page's headings: lowercase, punctuation dropped, spaces as
/// hyphens, and `-1`, `-2`... for repeats.
fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut anchors = BTreeSet::new();
    let mut heading: Option<String> = None;
    for event in Parser::new(markdown) {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::Text(text) | Event::Code(text) => {
                if let Some(h) = &mut heading {
                    h.push_str(&text);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let text = heading.take().unwrap_or_default();
                let slug: String = text
                    .to_lowercase()
                    .chars()
                    .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
                    .map(|c| if c == ' ' { '-' } else { c })
                    .collect();
                let mut anchor = slug.clone();
                let mut n = 0;
                while anchors.contains(&anchor) {
                    n += 1;
                    anchor = format!("{slug}-{n}");
                }
                anchors.insert(anchor);
            }
            _ => {}
        }
    }
    anchors
}

/// Every link and image target of a page.
fn targets(markdown: &str) -> Vec<String> {
    Parser::new(markdown)
        .filter_map(|event| match event {
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                Some(dest_url.into_string())
            }
            _ => None,
        })
        .collect()
}

#[test]
fn every_relative_link_in_the_documentation_resolves() {
    let root = workspace_root();
    let mut pages: Vec<PathBuf> = vec![root.join("README.md")];
    pages.extend(
        std::fs::read_dir(root.join("docs"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "md")),
    );
    let mut checked = 0;
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        let shown = page.strip_prefix(&root).unwrap().display().to_string();
        for target in targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, fragment) = match target.split_once('#') {
                Some((path, fragment)) => (path, Some(fragment)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(path)
            };
            if !file.exists() {
                broken.push(format!("{shown}: {target}: no such file"));
                continue;
            }
            if let Some(fragment) = fragment {
                let text = std::fs::read_to_string(&file).unwrap_or_default();
                if !anchors(&text).contains(fragment) {
                    broken.push(format!("{shown}: {target}: no such heading"));
                }
            }
        }
    }
    eprintln!(
        "{checked} relative links in {} pages, {} broken",
        pages.len(),
        broken.len()
    );
    assert!(
        checked >= 50,
        "only {checked} links found: is the parser reading the pages?"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn anchors_are_made_as_github_makes_them() {
    let page = "# leasehold\n## `leasehold status`\n### Health-checked leadership: `[child.health]`\n\
                ## What is tested end to end, and what is not\n## Logs\n## Logs\n";
    let expected = [
        "leasehold",
        "leasehold-status",
        "health-checked-leadership-childhealth",
        "what-is-tested-end-to-end-and-what-is-not",
        "logs",
        "logs-1",
    ];
    assert_eq!(
        anchors(page),
        expected.iter().map(|a| a.to_string()).collect()
    );
}
