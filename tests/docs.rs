//! The documentation holds together: README.md stays short, every page in
//! `docs/` is linked from it, and every relative link in README.md,
//! ARCHITECTURE.md and `docs/*.md` leads to a file that exists and, with a
//! `#fragment`, to a heading of that file.
//!
//! A fragment is matched as GitHub makes heading anchors: the heading's text
//! with its inline markup taken out, lowercased, every character that is not
//! a letter, a digit, a space, `-` or `_` dropped, spaces turned into `-`; a
//! heading whose anchor is already taken gets `-1`, `-2`, … Links to
//! `http(s)://` and `mailto:` are not checked. Fenced blocks, code spans and
//! HTML comments hold no links.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The most lines README.md may have (issue 48): read in ten minutes.
const README_MAX_LINES: usize = 400;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ has a parent")
        .to_path_buf()
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The pages under `docs/`, sorted: its `.md` files but hidden ones (a
/// `.name.md` is a scratch file, not a page).
fn pages() -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = fs::read_dir(repo().join("docs"))
        .expect("read docs/")
        .map(|entry| entry.expect("a docs/ entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .filter(|path| !path.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    pages.sort();
    pages
}

/// The documents whose links are checked.
fn documents() -> Vec<PathBuf> {
    let mut documents = vec![repo().join("README.md"), repo().join("ARCHITECTURE.md")];
    documents.extend(pages());
    documents
}

/// Whether `line` opens or closes a fenced block.
fn is_fence(line: &str) -> bool {
    let line = line.trim_start();
    line.starts_with("```") || line.starts_with("~~~")
}

/// The text outside fenced blocks, code spans and HTML comments, line
/// breaks kept (a link's text may run over two lines).
fn prose(text: &str) -> String {
    let mut outside_fences = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if is_fence(line) {
            fenced = !fenced;
        } else if !fenced {
            outside_fences.push_str(line);
        }
        outside_fences.push('\n');
    }
    let mut prose = String::new();
    let mut rest = outside_fences.as_str();
    while let Some(i) = rest.find(['`', '<']) {
        prose.push_str(&rest[..i]);
        rest = &rest[i..];
        if let Some(comment) = rest.strip_prefix("<!--") {
            rest = comment.split_once("-->").map_or("", |(_, after)| after);
        } else if rest.starts_with('<') {
            prose.push('<');
            rest = &rest[1..];
        } else {
            // A code span closes on a run of as many backticks as opened it,
            // within its paragraph; a run left open is text.
            let run = rest.len() - rest.trim_start_matches('`').len();
            let ticks = &rest[..run];
            match rest[run..].split_once(ticks) {
                Some((code, after)) if !code.contains("\n\n") => rest = after,
                _ => {
                    prose.push_str(ticks);
                    rest = &rest[run..];
                }
            }
        }
    }
    prose.push_str(rest);
    prose
}

/// The targets of the inline links (`[text](target)`, images too) and of
/// the reference definitions (`[label]: target`) in `text`.
fn link_targets(text: &str) -> Vec<String> {
    let prose = prose(text);
    let mut targets = Vec::new();
    let mut rest = prose.as_str();
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        let end = rest.find([')', '\n']).unwrap_or(rest.len());
        targets.push(rest[..end].to_string());
        rest = &rest[end..];
    }
    for line in prose.lines() {
        let line = line.trim_start();
        if let Some((label, target)) = line.strip_prefix('[').and_then(|l| l.split_once("]:"))
            && !label.contains(']')
        {
            targets.push(target.to_string());
        }
    }
    targets
        .iter()
        .map(|target| {
            let target = target.trim();
            let target = target.split_whitespace().next().unwrap_or("");
            let target = target.strip_prefix('<').unwrap_or(target);
            target.strip_suffix('>').unwrap_or(target).to_string()
        })
        .collect()
}

/// A heading's text as GitHub renders it: code spans, emphasis and link
/// targets taken out.
fn rendered(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    while let Some(i) = rest.find("](") {
        text.push_str(&rest[..i]);
        rest = rest[i + 2..].split_once(')').map_or("", |(_, after)| after);
    }
    text.push_str(rest);
    text.chars()
        .filter(|c| !matches!(c, '`' | '*' | '[' | ']'))
        .collect()
}

/// The anchor GitHub gives a heading whose text is `heading`.
fn slug(heading: &str) -> String {
    rendered(heading)
        .trim()
        .to_lowercase()
        .chars()
        .filter(|&c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of the headings of `text`, outside fenced blocks.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut anchors = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if is_fence(line) {
            fenced = !fenced;
            continue;
        }
        let level = line.len() - line.trim_start_matches('#').len();
        let Some(heading) = line[level..].strip_prefix(' ') else {
            continue;
        };
        if fenced || !(1..=6).contains(&level) {
            continue;
        }
        let base = slug(heading.trim_end_matches('#'));
        let mut anchor = base.clone();
        let mut n = 0;
        while !anchors.insert(anchor.clone()) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
    }
    anchors
}

/// What is wrong with the link `target` in `document`, if anything.
fn broken(document: &Path, target: &str) -> Option<String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (path, fragment) = target.split_once('#').unwrap_or((target, ""));
    let file = if path.is_empty() {
        document.to_path_buf()
    } else {
        document
            .parent()
            .expect("a document has a directory")
            .join(path)
    };
    if !file.exists() {
        return Some(format!("{} does not exist", file.display()));
    }
    if fragment.is_empty() {
        return None;
    }
    if file.extension().is_none_or(|ext| ext != "md") {
        return Some(format!(
            "#{fragment} on {}, which is not Markdown",
            file.display()
        ));
    }
    let anchors = anchors(&read(&file));
    if anchors.contains(fragment) {
        None
    } else {
        Some(format!("{} has no heading #{fragment}", file.display()))
    }
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let mut problems = Vec::new();
    for document in documents() {
        for target in link_targets(&read(&document)) {
            if let Some(problem) = broken(&document, &target) {
                let name = document.strip_prefix(repo()).unwrap_or(&document);
                problems.push(format!("{}: ({target}): {problem}", name.display()));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_readme_is_short() {
    let lines = read(&repo().join("README.md")).lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, more than {README_MAX_LINES}: move a subject to docs/"
    );
}

#[test]
fn the_readme_links_every_page() {
    let linked: BTreeSet<String> = link_targets(&read(&repo().join("README.md")))
        .into_iter()
        .map(|target| target.split('#').next().unwrap_or("").to_string())
        .collect();
    for page in pages() {
        let name = format!("docs/{}", page.file_name().unwrap().to_string_lossy());
        assert!(linked.contains(&name), "README.md does not link {name}");
    }
}

#[test]
fn anchors_and_links_are_read_as_github_does() {
    assert_eq!(slug("Kernel sandbox (Landlock)"), "kernel-sandbox-landlock");
    assert_eq!(
        slug("Resources, completion and logging"),
        "resources-completion-and-logging"
    );
    assert_eq!(
        slug("`list_directory` and `git_log`"),
        "list_directory-and-git_log"
    );
    assert_eq!(slug("1. Pin"), "1-pin");
    assert_eq!(slug("See [Tools](docs/tools.md)"), "see-tools");
    assert_eq!(slug("Café à la carte"), "café-à-la-carte");

    let text = "# A\n## A\n```sh\n# not a heading\n```\n### A #\n";
    let expected: BTreeSet<String> = ["a", "a-1", "a-2"].map(String::from).into();
    assert_eq!(anchors(text), expected);

    let text = "[one](a.md#x) `[no](b.md)` [two\nlines](#y)\n<!-- [no](c.md) -->\n\
                ```\n[no](d.md)\n```\n![img](e.png \"title\")\n[ref]: f.md\n";
    assert_eq!(link_targets(text), ["a.md#x", "#y", "e.png", "f.md"]);

    let readme = repo().join("README.md");
    assert_eq!(broken(&readme, "docs/tools.md#example-calls"), None);
    assert_eq!(broken(&readme, "https://example.org/nowhere#x"), None);
    assert!(broken(&readme, "docs/tools.md#no-such-heading").is_some());
    assert!(broken(&readme, "docs/no-such-page.md").is_some());
    assert!(broken(&readme, "#no-such-heading").is_some());
}
