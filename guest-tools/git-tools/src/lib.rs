//! The history tool `git` (commands log, show, diff, blame, status), its
//! own component (one copy of gitoxide in the binary). The host makes a
//! fresh instance for each `describe` and each `call` and tells it, through
//! the WIT `history` interface, which tool it is, where each root's git directory is preopened (read-only, no `hooks`)
//! and what the root's deny list hides: the host's own matcher, so no copy
//! of the patterns lives here.
//!
//! The reading is `git-history`'s: no `git` process, nothing the
//! repository's configuration names is run, and every path and content is
//! seen through its `View` (the root's part of the repository, the deny
//! list). Paths given to these tools name files in the repository's
//! history, not on disk: the host resolves the root, and the deny list
//! judges each path the history holds.

mod format;
mod git;
mod tools;

use loomfs_guest::{Context, Descriptor, Output, ToolError};

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "history-component",
    });
}

use bindings::loom_fs::tool::history;
pub use git::Git;

/// The component's export: the tool the host named, described or called.
pub struct HistoryTools;

impl loomfs_guest::Guest for HistoryTools {
    fn describe() -> Descriptor {
        loomfs_guest::tool::describe::<Git>()
    }

    fn call(ctx: Context, arguments: String) -> Result<Output, ToolError> {
        let name = history::tool();
        loomfs_guest::noted(|| match name.as_str() {
            "git" => loomfs_guest::tool::call::<Git>(ctx, &arguments),
            other => Err(ToolError::Refused(format!(
                "this component serves no tool named '{}'",
                loomfs_guest::shown(other)
            ))),
        })
    }
}

#[cfg(target_arch = "wasm32")]
loomfs_guest::bindings::export!(HistoryTools with_types_in loomfs_guest::bindings);

#[cfg(test)]
mod readme {
    use super::*;

    #[test]
    fn readme_examples_fit_the_types_and_the_schemas() {
        let readme = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/tools.md"));
        loomfs_guest::check::readme_examples::<Git>(readme);
    }
}
