//! The host interfaces only built-in components may import (`wit/tool.wit`):
//! `history`, which tells the history tools which tool an instance serves,
//! where each root's git directory is and what the deny list hides; and
//! `documents`, which tells the document reader each root's
//! `max_document_bytes` and what the deny list hides of an archive.

use std::sync::Arc;

use super::{CallState, bindings, fs};
use crate::policy::Root;

/// What a history tool's instance is told: which tool it is, and for each
/// root of the call its repository (where its git directory is preopened)
/// and what the session's client roots leave of it.
pub(super) struct HistoryState {
    pub(super) tool: String,
    pub(super) roots: Vec<(Arc<Root>, Option<String>, Option<fs::Area>)>,
}

impl bindings::history::Host for CallState {
    fn tool(&mut self) -> String {
        self.history
            .as_ref()
            .map_or_else(String::new, |h| h.tool.clone())
    }

    fn repository(&mut self, root: String) -> Option<bindings::history::GitRepository> {
        let history = self.history.as_ref()?;
        let (root, git_dir, _) = history.roots.iter().find(|(r, _, _)| r.name == root)?;
        Some(bindings::history::GitRepository {
            git_dir: git_dir.clone()?,
            scope: root.repository.as_ref()?.scope.clone(),
        })
    }

    fn hidden(&mut self, root: String, path: String) -> bool {
        let Some(history) = self.history.as_ref() else {
            return true;
        };
        // Its history is hidden as its files are.
        match history.roots.iter().find(|(r, _, _)| r.name == root) {
            Some((r, _, area)) => hides(r, area.as_ref(), &path),
            None => true,
        }
    }
}

impl bindings::documents::Host for CallState {
    fn tool(&mut self) -> String {
        self.serves.clone()
    }

    fn max_document_bytes(&mut self, root: String) -> u64 {
        self.documents
            .iter()
            .find(|(r, _)| r.name == root)
            .map_or(0, |(r, _)| r.max_document_bytes)
    }

    fn hidden(&mut self, root: String, path: String) -> bool {
        match self.documents.iter().find(|(r, _)| r.name == root) {
            Some((r, area)) => hides(r, area.as_ref(), &path),
            None => true,
        }
    }
}

/// Whether `root`'s deny list names a component of `path` (root-relative),
/// or (under `client_roots = "narrow"`) `path` lies outside what the
/// client roots leave of it: what the `history` and `documents`
/// interfaces answer for a path only the component can see (a file in
/// history, an archive's member).
fn hides(root: &Root, area: Option<&fs::Area>, path: &str) -> bool {
    let path = std::path::Path::new(path);
    root.deny.match_path(path).is_some()
        || area.is_some_and(|a| a.place(path) == fs::Place::Outside)
}
