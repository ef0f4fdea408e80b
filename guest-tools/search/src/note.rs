//! What the model must know besides the matches.

use loomfs_guest::human_bytes;
use loomfs_guest::walk;

use super::{Cut, Search};

/// What the model must know besides the matches: why the search stopped
/// early, what it skipped.
pub(super) fn note(
    search: &Search,
    stats: &walk::Stats,
    max_results: u32,
    max_read_bytes: u64,
    time_limit_ms: u64,
) -> Option<String> {
    let found = &search.found;
    let cut = search.cut.as_ref().map(|(cut, _)| *cut);
    let unreadable_files = search.unreadable_files;
    let mut notes = Vec::new();
    let go_on = match &found.next_cursor {
        Some(next) => format!(", or call again with cursor: \"{next}\" to go on"),
        None => String::new(),
    };
    match cut {
        Some(Cut::Results) => notes.push(format!(
            "stopped at {max_results} matches (nearest first); there are more: narrow \
             the pattern or the path{go_on}"
        )),
        Some(Cut::Bytes) => notes.push(format!(
            "stopped after scanning {} (max_search_bytes): files further from the start \
             were not searched; narrow the pattern or the path{go_on}",
            human_bytes(found.scanned_bytes)
        )),
        Some(Cut::Time) => notes.push(format!(
            "stopped near the time limit ({} ms): files further from the start were not \
             searched; narrow the pattern or the path{go_on}",
            time_limit_ms
        )),
        None => {}
    }
    let too_large_files = found.skipped_too_large - search.unsearched_documents;
    if too_large_files > 0 {
        notes.push(format!(
            "{too_large_files} files larger than {} (max_read_bytes) were not searched",
            human_bytes(max_read_bytes)
        ));
    }
    if search.unsearched_documents > 0 {
        notes.push(format!(
            "{} documents were not searched whole: larger than this root's \
             max_document_bytes, their text larger than max_search_bytes, or too slow to \
             read within the time limit",
            search.unsearched_documents
        ));
    }
    if found.skipped_binary > 0 {
        notes.push(format!(
            "{} binary files were not searched",
            found.skipped_binary
        ));
    }
    if unreadable_files > 0 {
        notes.push(format!(
            "{} files could not be read and were skipped",
            unreadable_files
        ));
    }
    if found.ignored > 0 {
        notes.push(format!(
            "{} ignored entries were left out (excluded by the root's .gitignore/.ignore \
             files; an ignored directory counts once and was not searched): pass \
             ignored: \"include\" to search them",
            found.ignored
        ));
    }
    notes.extend(stats.notes());
    (!notes.is_empty()).then(|| notes.join("; "))
}
