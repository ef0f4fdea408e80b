//! `documents: true`: a document or an archive searched in the text the
//! document reader gives of it (see the crate's comment).

use std::time::Instant;

use loomfs_guest::content;
use loomfs_guest::walk::{self, Flow};
use wasip2::filesystem::types::Descriptor as File;

use super::lines::Lines;
use super::needle::Needle;
use super::{Cut, Search, read_up_to};

/// What the document reader lends the search for `documents: true`: its
/// formats, its limit and its parsers, which the `search_files` component
/// does not carry.
pub trait Documents {
    /// Whether a file starting with `head` is a document or an archive.
    fn is_document(&self, head: &[u8]) -> bool;

    /// The largest document, in bytes, read whole from `root`.
    fn max_bytes(&self, root: &str) -> u64;

    /// Calls `each` with each text of the document or archive `bytes`
    /// (`rel` on `root`), in order, while it returns true: a document's
    /// text once, an archive's text and document members each with its
    /// name (those the deny list hides left out). Errs with why the file
    /// does not read.
    /// Gives `Ok(false)` for a file that is neither after all (a compound
    /// file that is no workbook).
    fn texts(
        &self,
        root: &str,
        rel: &str,
        bytes: &[u8],
        each: &mut dyn FnMut(Text) -> bool,
    ) -> Result<bool, String>;
}

/// One text of a document: its archive member, if it is one, its text as
/// `read_document` gives it (empty for a member that is not searched: an
/// image, a binary file, an archive), and the bytes inflated to get it.
pub struct Text<'a> {
    pub member: Option<&'a str>,
    pub text: &'a str,
    pub inflated: u64,
}

impl Search<'_> {
    /// Searches a document or an archive (`bytes` its first bytes, `len`
    /// its size) in the text the document reader gives of it; `None` when
    /// it is to be searched as a plain file instead: no document after all,
    /// or one that does not read or is over the document limit while its
    /// head is text (a note quoting `%PDF-`).
    ///
    /// Its texts are counted against the byte budget as they are after
    /// inflating, and it costs its own size at least. It is searched whole
    /// on one page or not at all: one that overruns the budget, or the
    /// time, gives no match and stops the search there, so the next page
    /// starts with it; one that overruns a whole budget, or a whole page's
    /// time, is skipped and counted.
    pub(super) fn search_document(
        &mut self,
        file: &File,
        entry: &walk::Entry,
        needle: &Needle,
        (reader, root): (&dyn Documents, &str),
        bytes: &mut Vec<u8>,
        len: u64,
    ) -> Option<Flow> {
        let text_head = !content::is_binary(bytes);
        if len > reader.max_bytes(root) || len > self.max_search_bytes {
            return (!text_head).then(|| self.unsearched_document());
        }
        if self.found.scanned_bytes + len > self.max_search_bytes {
            return Some(self.stop(Cut::Bytes, entry));
        }
        if (bytes.len() as u64) < len && read_up_to(file, bytes, len).is_err() {
            self.unreadable_files += 1;
            return Some(Flow::Continue);
        }
        bytes.truncate(len as usize);
        let (matches, taken, scanned) = (
            self.found.matches.len(),
            self.taken,
            self.found.scanned_bytes,
        );
        let mut passed = self.taken;
        let mut flow = Flow::Continue;
        let mut cut = None;
        let mut pieces = 0;
        let read = reader.texts(root, &entry.rel, bytes, &mut |piece| {
            let size = piece.inflated.max(piece.text.len() as u64);
            if self.found.scanned_bytes + size > self.max_search_bytes {
                cut = Some(Cut::Bytes);
                return false;
            }
            if Instant::now() >= self.deadline {
                cut = Some(Cut::Time);
                return false;
            }
            pieces += 1;
            self.found.scanned_bytes += size;
            if piece.text.is_empty() {
                return true;
            }
            let mut lines = Lines {
                decoded: Some(None),
                legacy: None,
                file: piece.text.as_bytes(),
            };
            let haystack = piece.text.as_bytes();
            flow = self.search_text(
                entry,
                piece.member,
                needle,
                haystack,
                &mut lines,
                &mut passed,
            );
            flow == Flow::Continue
        });
        if let Some(cut) = cut {
            // Undone: the page ends before it, or it is skipped when it
            // is all this page could have held.
            let first = scanned == 0 && matches == 0;
            self.found.matches.truncate(matches);
            self.taken = taken;
            self.found.scanned_bytes = scanned;
            return Some(match first {
                true => self.unsearched_document(),
                false => self.stop(cut, entry),
            });
        }
        match read {
            Ok(true) => {}
            Ok(false) => return None,
            Err(_) if pieces == 0 && text_head => return None,
            Err(_) => self.unreadable_files += 1,
        }
        if flow == Flow::Continue {
            let counted = self.found.scanned_bytes - scanned;
            self.found.scanned_bytes += len.saturating_sub(counted);
        }
        Some(flow)
    }

    /// Skips a document that one page cannot search whole: over the root's
    /// document limit, its text over the whole byte budget, or its reading
    /// longer than a page's time.
    fn unsearched_document(&mut self) -> Flow {
        self.found.skipped_too_large += 1;
        self.unsearched_documents += 1;
        Flow::Continue
    }
}
