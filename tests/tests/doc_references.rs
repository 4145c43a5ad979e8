//! The documentation stays whole:
//! - every protocol section a source file cites (a section sign followed by a number such as
//!   `1.5` or `13.3`) has its heading in `docs/protocol.md` (`## ` or `### ` followed by the
//!   section sign, the number and a space);
//! - the README and the pages under `docs/` stand alone: no path outside the repository
//!   (`../shared`) and no tracker references (`issue #12`, `(#12)`, `#12's`, a bare `#12`).
//!
//! Plain std: it reads files under the workspace root and needs no cluster.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The section sign, written as an escape so that this file cites no section itself.
const SECTION: char = '\u{a7}';

/// The crates whose sources are scanned, relative to the workspace root.
const SOURCE_DIRS: [&str; 5] = [
    "iggy-route-core",
    "iggy-route-tokio",
    "iggy-route-mio",
    "tests",
    "fuzz",
];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace")
        .to_path_buf()
}

/// Every file under `dir` whose name ends with `extension`, skipping `target` directories
/// and hidden ones.
fn files_with_extension(dir: &Path, extension: &str, found: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let entry = entry.unwrap();
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            if name == "target" || name.starts_with('.') {
                continue;
            }
            files_with_extension(&path, extension, found);
        } else if name.ends_with(extension) {
            found.push(path);
        }
    }
}

/// The section numbers cited in `text`: the section sign, optional spaces, then digits with
/// optional `.digits` parts (a trailing dot is punctuation, not part of the number).
fn cited_sections(text: &str) -> Vec<String> {
    let mut sections = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(SECTION) {
        rest = &rest[at + SECTION.len_utf8()..];
        let after = rest.trim_start_matches(' ');
        let mut number = String::new();
        let mut chars = after.chars().peekable();
        while let Some(&c) = chars.peek() {
            if c.is_ascii_digit() {
                number.push(c);
                chars.next();
            } else if c == '.' && number.chars().last().is_some_and(|l| l.is_ascii_digit()) {
                let mut lookahead = chars.clone();
                lookahead.next();
                if lookahead.peek().is_some_and(char::is_ascii_digit) {
                    number.push(c);
                    chars.next();
                } else {
                    break;
                }
            } else {
                break;
            }
        }
        if !number.is_empty() {
            sections.push(number);
        }
    }
    sections
}

/// The section numbers that have a heading in the protocol page.
fn protocol_headings(page: &str) -> BTreeSet<String> {
    page.lines()
        .filter_map(|line| {
            let heading = line
                .strip_prefix("### ")
                .or_else(|| line.strip_prefix("## "))?;
            let number = heading.strip_prefix(SECTION)?;
            let (number, _title) = number.split_once(' ')?;
            Some(number.to_string())
        })
        .collect()
}

#[test]
fn every_cited_protocol_section_has_a_heading() {
    let root = workspace_root();
    let page = fs::read_to_string(root.join("docs/protocol.md")).expect("docs/protocol.md exists");
    let headings = protocol_headings(&page);

    let mut sources = Vec::new();
    for dir in SOURCE_DIRS {
        files_with_extension(&root.join(dir), ".rs", &mut sources);
    }
    assert!(
        sources.len() > 50,
        "found only {} source files under {}",
        sources.len(),
        root.display()
    );

    let mut missing: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut cited = 0;
    for source in &sources {
        let text = fs::read_to_string(source).unwrap();
        for (index, line) in text.lines().enumerate() {
            for section in cited_sections(line) {
                cited += 1;
                if !headings.contains(&section) {
                    let place = format!(
                        "{}:{}",
                        source.strip_prefix(&root).unwrap_or(source).display(),
                        index + 1
                    );
                    missing.entry(section).or_default().push(place);
                }
            }
        }
    }
    assert!(
        cited > 0,
        "no section references found: is the scan looking in the right place?"
    );
    assert!(
        missing.is_empty(),
        "sections cited in the source without a `## {SECTION}N ` or `### {SECTION}N ` heading in \
         docs/protocol.md:\n{}",
        missing
            .iter()
            .map(|(section, places)| format!("  {SECTION}{section}: {}", places.join(", ")))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// What a user-facing page may not contain, found in `line`.
fn forbidden_in(line: &str) -> Option<&'static str> {
    if line.contains("../shared") {
        return Some("a path outside the repository (../shared)");
    }
    let lower = line.to_lowercase();
    let bytes = lower.as_bytes();
    for (at, _) in lower.match_indices('#') {
        let digits = bytes[at + 1..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if digits == 0 {
            continue;
        }
        let before = lower[..at].trim_end_matches(' ');
        let after = &lower[at + 1 + digits..];
        if before.ends_with("issue") || before.ends_with("issues") {
            return Some("an issue reference (issue #N)");
        }
        if lower[..at].ends_with('(') && after.starts_with(')') {
            return Some("an issue reference ((#N))");
        }
        if after.starts_with("'s") {
            return Some("an issue reference (#N's)");
        }
        // A bare `#N` after a space or at the start of a line; anchors in links
        // (`page.md#8-title`) follow a letter or a slash, and headings are `# ` with a space.
        let preceded_by_space = at == 0 || bytes[at - 1] == b' ';
        let next = after.chars().next();
        let ends_cleanly = next.is_none_or(|c| !c.is_alphanumeric() && c != '-' && c != '_');
        if preceded_by_space && ends_cleanly {
            return Some("an issue reference (#N)");
        }
    }
    None
}

#[test]
fn user_pages_stand_alone() {
    let root = workspace_root();
    let mut pages = vec![root.join("README.md")];
    files_with_extension(&root.join("docs"), ".md", &mut pages);
    assert!(pages.len() > 1, "no pages under docs/");

    let mut problems = Vec::new();
    for page in &pages {
        let text = fs::read_to_string(page).unwrap();
        for (index, line) in text.lines().enumerate() {
            if let Some(what) = forbidden_in(line) {
                problems.push(format!(
                    "  {}:{}: {what}: {}",
                    page.strip_prefix(&root).unwrap_or(page).display(),
                    index + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "the README and docs/ must stand alone:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_checks_catch_what_they_are_for() {
    let s = SECTION;
    assert_eq!(
        cited_sections(&format!("protocol {s}1.5, {s}13.3.")),
        ["1.5", "13.3"]
    );
    assert_eq!(
        cited_sections(&format!("({s}2, last paragraph) {s}8.")),
        ["2", "8"]
    );
    assert_eq!(
        protocol_headings(&format!(
            "## {s}1 Frames\n### {s}1.5 Eviction\n#### {s}9 no\n"
        )),
        BTreeSet::from(["1".to_string(), "1.5".to_string()])
    );
    for bad in [
        "see ../shared/real-cluster/README.md",
        "Every command (issue #19)",
        "at the targets of #16 (moving)",
        "fixed (#13)",
        "answer #16's targets",
        "#12 replaced it",
    ] {
        assert!(forbidden_in(bad).is_some(), "not caught: {bad}");
    }
    for fine in [
        "see [design.md](design.md#configuration)",
        "[protocol](protocol.md#8-consensus-groups-and-primaries)",
        "# Every test, as CI runs it",
        "#[tokio::main]",
        "a `#[global_allocator]` switched on",
    ] {
        assert!(forbidden_in(fine).is_none(), "caught wrongly: {fine}");
    }
}
