//! `documents: true`: a document or an archive searched in the text the
//! document reader gives of it (see the crate's comment).

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
    /// its size) in the text the document reader gives of it. Its texts
    /// are counted against the byte budget as they are after inflating, and
    /// it costs its own size at least. It is searched whole on one page or
    /// not at all: one whose texts overrun the budget gives no match and
    /// stops the search there, so the next page starts with it; one that
    /// overruns a whole budget is skipped as too large.
    pub(super) fn search_document(
        &mut self,
        file: &File,
        entry: &walk::Entry,
        needle: &Needle,
        (reader, root): (&dyn Documents, &str),
        mut bytes: Vec<u8>,
        len: u64,
    ) -> Flow {
        if len > reader.max_bytes(root) || len > self.max_search_bytes {
            return self.too_large_document();
        }
        if self.found.scanned_bytes + len > self.max_search_bytes {
            return self.stop(Cut::Bytes, entry);
        }
        if (bytes.len() as u64) < len && read_up_to(file, &mut bytes, len).is_err() {
            self.unreadable_files += 1;
            return Flow::Continue;
        }
        bytes.truncate(len as usize);
        let (matches, taken, scanned) = (
            self.found.matches.len(),
            self.taken,
            self.found.scanned_bytes,
        );
        let mut passed = self.taken;
        let mut flow = Flow::Continue;
        let mut over = false;
        let read = reader.texts(root, &entry.rel, &bytes, &mut |piece| {
            let size = piece.inflated.max(piece.text.len() as u64);
            if self.found.scanned_bytes + size > self.max_search_bytes {
                over = true;
                return false;
            }
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
        if over {
            self.found.matches.truncate(matches);
            self.taken = taken;
            self.found.scanned_bytes = scanned;
            return match scanned {
                0 => self.too_large_document(),
                _ => self.stop(Cut::Bytes, entry),
            };
        }
        match read {
            Ok(true) => {}
            Ok(false) => self.found.skipped_binary += 1,
            Err(_) => self.unreadable_files += 1,
        }
        if flow == Flow::Continue {
            let counted = self.found.scanned_bytes - scanned;
            self.found.scanned_bytes += len.saturating_sub(counted);
        }
        flow
    }

    /// Skips a document over the root's document limit or the search's
    /// whole byte budget.
    fn too_large_document(&mut self) -> Flow {
        self.found.skipped_too_large += 1;
        self.too_large_documents += 1;
        Flow::Continue
    }
}
