//! Host bindings of the WIT worlds (`wit/tool.wit`). Kept in its own
//! module: the generated names (`Descriptor`, `Output`, ...) would clash with
//! rmcp's model types elsewhere. Generated code only: no logic here.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "tool-component",
});

/// The history component's world: the tool interface (called through the
/// bindings above) and the host's `history` interface, which only it may
/// import.
pub mod history_world {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "history-component",
    });
}

/// The document reader's world: the tool interface and the host's
/// `documents` interface, which only it may import.
pub mod document_world {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "document-component",
    });
}

pub use document_world::loom_fs::tool::documents;
pub use exports::loom_fs::tool::tool::{
    Annotations, Context, Descriptor, Image, Limits, Mount, Output, PathArgument, Permission,
    ToolError,
};
pub use history_world::loom_fs::tool::history;

impl From<Permission> for crate::policy::Permission {
    fn from(p: Permission) -> Self {
        match p {
            Permission::Read => crate::policy::Permission::Read,
            Permission::Write => crate::policy::Permission::Write,
            Permission::Delete => crate::policy::Permission::Delete,
        }
    }
}
