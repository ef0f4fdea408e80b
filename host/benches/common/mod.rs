//! What the benches that call a component through the runtime share: a
//! reference root, the built-in components loaded, a call on one path.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use loom_fs_mcp::policy::{DenyList, Permission, Role, Root};
use loom_fs_mcp::runtime::{self, Budget, Cache, CallMount, CallRequest, GuestLimits, Runtime};

/// A reference root `docs` at `path`, reading whole files up to `max_read_bytes`.
pub fn reference_root(path: PathBuf, max_read_bytes: u64) -> Arc<Root> {
    Arc::new(Root {
        name: "docs".into(),
        path,
        role: Role::Reference,
        perms: Role::Reference.ceiling(),
        deny: DenyList::new([]).unwrap(),
        extra_deny: vec![],
        max_read_bytes,
        max_document_bytes: 64 << 20,
        min_free_bytes: 0,
        trash_max_bytes: 0,
        repository: None,
    })
}

/// A runtime with the built-in components `tools`, compiled once into the
/// bench cache.
pub struct Components {
    rt: Runtime,
    index: std::collections::HashMap<&'static str, usize>,
}

impl Components {
    pub fn load(tools: &[&str], output_bytes: u64) -> Components {
        let mut rt = Runtime::new(Budget {
            memory_bytes: 256 << 20,
            timeout: Duration::from_secs(30),
            output_bytes,
        })
        .unwrap();
        let cache = Cache::at(concat!(env!("CARGO_TARGET_TMPDIR"), "/bench-cache"));
        let mut index = std::collections::HashMap::new();
        for (name, wasm) in runtime::BUILTINS.iter().filter(|(n, _)| tools.contains(n)) {
            let component = cache.component(rt.engine(), name, wasm).unwrap();
            index.insert(
                *name,
                rt.load(&component, runtime::BUILT_IN.into()).unwrap(),
            );
        }
        assert_eq!(index.len(), tools.len(), "every tool is built in");
        Components { rt, index }
    }

    /// `tool` on `path` of `root`, read-only; its text blocks.
    pub fn call(&self, tool: &str, root: &Arc<Root>, path: &str) -> Vec<String> {
        let out = self.rt.call(
            self.index[tool],
            CallRequest {
                tool: tool.to_string(),
                mounts: vec![CallMount::unchecked(Arc::clone(root), Permission::Read)],
                limits: GuestLimits {
                    max_entries: 1000,
                    max_results: 200,
                    max_search_bytes: 1 << 26,
                },
                arguments: format!(r#"{{"root":"docs","path":"{path}"}}"#),
                staging: None,
                cancel: Default::default(),
                activity: Arc::default(),
                quota: None,
            },
        );
        out.result
            .map_err(|e| format!("{tool} {path}: {e:?}"))
            .unwrap()
            .text
    }
}
