//! `search_files` with `documents: true`, which the host routes to this
//! component: `loomfs_search`'s search, lent this component's parsers for
//! the text of documents and of archive members, each as `read_document`
//! gives it (so a match's line is the line `read_document` numbers).

use loomfs_guest::content::{image_mime, is_binary};
use loomfs_guest::encoding::decode_owned;
use loomfs_search::{Documents, Text};

use crate::{archive, detect, extract, hidden, max_document_bytes};

/// Whether a call is a search: the host says which tool a call is for,
/// so a `read_document` call is never one, whatever its arguments.
pub fn asked(arguments: &str) -> bool {
    #[cfg(target_arch = "wasm32")]
    {
        let _ = arguments;
        crate::bindings::loom_fs::tool::documents::tool() == "search_files"
    }
    // Natively (the unit tests) there is no host: a call is a search when
    // its arguments ask `documents: true`, which `read_document` does not
    // take.
    #[cfg(not(target_arch = "wasm32"))]
    {
        serde_json::from_str::<serde_json::Value>(arguments)
            .is_ok_and(|v| v.get("documents") == Some(&serde_json::Value::Bool(true)))
    }
}

/// The document reader as the search uses it.
pub struct Reader;

impl Documents for Reader {
    fn is_document(&self, head: &[u8]) -> bool {
        detect::signature(head)
    }

    fn max_bytes(&self, root: &str) -> u64 {
        max_document_bytes(root)
    }

    fn texts(
        &self,
        root: &str,
        rel: &str,
        bytes: &[u8],
        each: &mut dyn FnMut(Text) -> bool,
    ) -> Result<bool, String> {
        if let Some(format) = detect::format(bytes) {
            let text = extract(format, bytes)?.text;
            each(Text {
                member: None,
                text: &text,
                inflated: 0,
            });
            return Ok(true);
        }
        let Some(packing) = archive::packing(bytes) else {
            return Ok(false);
        };
        let hides = |name: &str| hidden(root, &format!("{rel}/{name}"));
        archive::each_file(packing, bytes, &hides, &mut |name, data| {
            let inflated = data.len() as u64;
            let text = member_text(data).unwrap_or_default();
            each(Text {
                member: Some(name),
                text: &text,
                inflated,
            })
        })?;
        Ok(true)
    }
}

/// A member's text as `read_document` gives it: a document's, or the
/// member's own decoded; none for an image, a binary file, an archive (not
/// opened inside another) or a document that does not read.
fn member_text(data: Vec<u8>) -> Option<String> {
    if let Some(format) = detect::format(&data) {
        return extract(format, &data).ok().map(|e| e.text);
    }
    if archive::packing(&data).is_some()
        || image_mime(&data).is_some()
        || is_binary(&data[..data.len().min(4096)])
    {
        return None;
    }
    Some(decode_owned(data, true).text)
}
