//! The catalogue: the tools one server lists, derived from the loaded
//! components and the config. A component is listed only if some root
//! grants the permission it needs (after its entry's cap), and its
//! description names those roots; its hints follow that permission
//! whatever the component says.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{Tool, ToolAnnotations};

use super::results::{is_tool_name, list_roots_tool, offer_roots, schema};
use crate::config::{ComponentEntry, Config};
use crate::policy::{LIST, PathArg, Permission, Perms, Root};
use crate::runtime::{self, Runtime};

/// The listed tools, `list_roots` first, then each component's, in the
/// order they were loaded.
pub(super) struct Catalogue {
    entries: Vec<Entry>,
}

/// What calling a listed tool does.
pub(super) enum Action {
    ListRoots,
    Component {
        index: usize,
        paths: Vec<PathArg>,
        /// The component that serves the call instead when it asks
        /// `documents: true` (the document reader, for the built-in
        /// [`runtime::DOCUMENT_SEARCH`]).
        documents: Option<usize>,
    },
}

impl Action {
    /// The component that serves a call with `arguments`, and the path
    /// arguments the host resolves for it; none for `list_roots`.
    pub(super) fn component(
        &self,
        arguments: &rmcp::model::JsonObject,
    ) -> Option<(usize, &[PathArg])> {
        match self {
            Action::ListRoots => None,
            Action::Component {
                index,
                paths,
                documents,
            } => {
                let asks = arguments.get("documents") == Some(&serde_json::Value::Bool(true));
                let index = documents.filter(|_| asks).unwrap_or(*index);
                Some((index, paths))
            }
        }
    }
}

/// A listed tool: what it is, what calling it does, where it acts.
pub(super) struct Entry {
    pub(super) tool: Tool,
    pub(super) action: Action,
    /// The roots the tool is offered, with the permissions it has there:
    /// every root for a built-in; for a third-party tool, those its entry
    /// names (`roots`), capped by its `permissions`.
    pub(super) roots: Vec<Arc<Root>>,
    /// The first digits of a third-party component's digest, for its
    /// audit lines.
    pub(super) digest: Option<String>,
    /// Its calls' deadline and output limit (a third-party entry may set
    /// them lower than the server's).
    pub(super) timeout: Duration,
    pub(super) output_bytes: u64,
}

/// What `check` shows of one listed tool.
pub struct Surface<'a> {
    /// The permission it needs (after its entry's cap).
    pub need: Permission,
    /// `built-in` or its file.
    pub source: &'a str,
    /// The roots it may act on.
    pub roots: Vec<&'a str>,
    /// The permission it declares, when its entry caps it lower.
    pub declared: Option<Permission>,
}

/// The strongest permission at most `op` that `cap` holds (read, which
/// every cap holds, at least).
pub fn capped(op: Permission, cap: Option<Perms>) -> Permission {
    let Some(cap) = cap else {
        return op;
    };
    Permission::ALL
        .into_iter()
        .filter(|p| *p <= op && cap.contains(*p))
        .max()
        .unwrap_or(Permission::Read)
}

/// What is wrong with a component's self-description, if anything: its
/// name, its path arguments against its permission, its schemas. (Whether
/// its name is taken is the surface's business.)
pub fn declaration_problem(d: &runtime::Descriptor) -> Option<String> {
    if !is_tool_name(&d.name) {
        return Some("a tool name is 1 to 64 of a-z, 0-9 and '_', starting with a letter".into());
    }
    let permission = Permission::from(d.permission);
    // A path argument may not do more than the tool declares: the
    // declaration decides where the tool is listed and how it is
    // annotated. Only a tool that changes things may need more on a
    // second root (a move deletes at its source).
    if let Some(p) = d.path_arguments.iter().find(|p| {
        Permission::from(p.permission) > permission
            || p.across_roots
                .is_some_and(|a| Permission::from(a) > permission && permission == Permission::Read)
    }) {
        return Some(format!(
            "path argument '{}' needs more than the tool declares ({permission})",
            p.path_field
        ));
    }
    // A list of paths is for reading: what a call keeps and locks is
    // reckoned per declared path argument.
    if let Some(p) = d.path_arguments.iter().find(|p| {
        p.path_field.ends_with(LIST)
            && (Permission::from(p.permission) != Permission::Read || p.across_roots.is_some())
    }) {
        return Some(format!(
            "path argument '{}' is a list of paths, which is for reading only",
            p.path_field
        ));
    }
    if let Err(e) = schema(&d.input_schema) {
        return Some(format!("input schema: {e}"));
    }
    if let Some(Err(e)) = d.output_schema.as_deref().map(schema) {
        return Some(format!("output schema: {e}"));
    }
    None
}

/// A component whose self-description cannot be served.
#[derive(Debug, thiserror::Error)]
#[error("component '{}' ({source_name}): {problem}", name.escape_debug())]
pub struct SurfaceError {
    name: String,
    source_name: String,
    problem: String,
}

impl SurfaceError {
    fn of(loaded: &runtime::Tool, problem: String) -> SurfaceError {
        SurfaceError {
            name: loaded.descriptor.name.clone(),
            source_name: loaded.source.clone(),
            problem,
        }
    }
}

impl Catalogue {
    /// The catalogue of `runtime`'s components under `config`.
    pub(super) fn new(config: &Config, runtime: &Runtime) -> Result<Catalogue, SurfaceError> {
        let mut entries = vec![Entry {
            tool: list_roots_tool(),
            action: Action::ListRoots,
            roots: config.roots.clone(),
            digest: None,
            timeout: config.limits.tool_timeout,
            output_bytes: config.limits.max_output_bytes,
        }];
        let reader = runtime.tools().iter().position(|t| t.documents);
        for (index, loaded) in runtime.tools().iter().enumerate() {
            let d = &loaded.descriptor;
            if entries.iter().any(|e| e.tool.name == d.name) {
                return Err(SurfaceError::of(
                    loaded,
                    "a tool of that name is already registered".into(),
                ));
            }
            entries.extend(Entry::of_component(config, index, loaded, reader)?);
        }
        Ok(Catalogue { entries })
    }

    /// The listed tool `name`.
    pub(super) fn get(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.tool.name == name)
    }

    /// The listed tools, in a stable order.
    pub(super) fn tools(&self) -> impl Iterator<Item = &Tool> {
        self.entries.iter().map(|e| &e.tool)
    }

    /// Each listed tool, by name: the permission it needs, where it came
    /// from (`built-in` or its file) and the roots it may act on, for `check`.
    pub(super) fn surface<'a>(
        &'a self,
        config: &Config,
        runtime: &'a Runtime,
    ) -> BTreeMap<&'a str, Surface<'a>> {
        self.entries
            .iter()
            .map(|e| {
                let (need, source, declared) = match &e.action {
                    Action::ListRoots => (Permission::Read, "built-in", Permission::Read),
                    Action::Component { index, .. } => {
                        let tool = &runtime.tools()[*index];
                        let declared = tool.descriptor.permission.into();
                        let cap = tool
                            .entry
                            .and_then(|i| config.components.get(i))
                            .and_then(|c| c.cap);
                        (capped(declared, cap), tool.source.as_str(), declared)
                    }
                };
                let roots = e
                    .roots
                    .iter()
                    .filter(|r| r.perms.contains(need))
                    .map(|r| r.name.as_str())
                    .collect();
                let surface = Surface {
                    need,
                    source,
                    roots,
                    declared: (declared != need).then_some(declared),
                };
                (e.tool.name.as_ref(), surface)
            })
            .collect()
    }
}

impl Entry {
    /// The entry of component `index`, or none when no root grants what it
    /// needs.
    /// `reader` is the document reader's index, if it is loaded.
    fn of_component(
        config: &Config,
        index: usize,
        loaded: &runtime::Tool,
        reader: Option<usize>,
    ) -> Result<Option<Entry>, SurfaceError> {
        let d = &loaded.descriptor;
        if let Some(p) = declaration_problem(d) {
            return Err(SurfaceError::of(loaded, p));
        }
        let declared = Permission::from(d.permission);
        let admitted = loaded.entry.and_then(|i| config.components.get(i));
        let cap = admitted.and_then(|e| e.cap);
        let permission = capped(declared, cap);
        let mut view = tool_roots(config, admitted);
        // The history tools are offered the roots whose history the
        // config lets them read, and none where there is none.
        if loaded.history {
            view.retain(|r| r.repository.is_some());
        }
        let roots: Vec<String> = view
            .iter()
            .filter(|r| r.perms.contains(permission))
            .map(|r| r.name.clone())
            .collect();
        if roots.is_empty() {
            return Ok(None);
        }
        let mut input = schema(&d.input_schema)
            .map_err(|e| SurfaceError::of(loaded, format!("input schema: {e}")))?;
        let offered = offer_roots(&mut input, &d.path_arguments, &view, cap);
        let output = d
            .output_schema
            .as_deref()
            .map(schema)
            .transpose()
            .map_err(|e| SurfaceError::of(loaded, format!("output schema: {e}")))?;
        // With no root field in its schema to name them, the description does.
        let named = (!offered).then_some(roots.as_slice());
        let mut tool = Tool::new(
            d.name.clone(),
            description(d, declared, permission, named),
            Arc::new(input),
        )
        .with_annotations(annotations(d, permission));
        if let Some(output) = output {
            tool = tool.with_raw_output_schema(Arc::new(output));
        }
        Ok(Some(Entry {
            tool,
            action: Action::Component {
                index,
                paths: path_args(d, cap),
                documents: reader
                    .filter(|_| loaded.is_built_in() && d.name == runtime::DOCUMENT_SEARCH),
            },
            roots: view,
            digest: loaded.short_digest().map(str::to_string),
            timeout: loaded.budget.timeout,
            output_bytes: loaded.budget.output_bytes,
        }))
    }
}

/// A component's description as listed: its own, what its cap withholds,
/// and the roots it can act on when no root field in its schema names them.
fn description(
    d: &runtime::Descriptor,
    declared: Permission,
    permission: Permission,
    roots: Option<&[String]>,
) -> String {
    let capping = if permission < declared {
        format!(
            "\n\nIt declares {declared}, but is capped at {permission} here: what it would do \
             beyond that is refused."
        )
    } else {
        String::new()
    };
    let named = roots.map(|r| format!("\n\nRoots it can act on: {}.", r.join(", ")));
    format!("{}{capping}{}", d.description, named.unwrap_or_default())
}

/// The hints of a tool that does at most `permission`, whatever the
/// component says. A read-only tool gets no `destructiveHint` or
/// `idempotentHint`: MCP gives them meaning only where `readOnlyHint` is
/// false, so they would be bytes in every `tools/list` that say nothing.
fn annotations(d: &runtime::Descriptor, permission: Permission) -> ToolAnnotations {
    let hints = ToolAnnotations::new()
        .read_only(permission == Permission::Read)
        .open_world(false);
    if permission == Permission::Read {
        return hints;
    }
    hints
        .destructive(d.annotations.destructive || permission == Permission::Delete)
        .idempotent(d.annotations.idempotent)
}

/// A component's path arguments, asking no more than its cap: a write it
/// attempts anyway meets a read-only mount, refused by the policing
/// filesystem.
fn path_args(d: &runtime::Descriptor, cap: Option<Perms>) -> Vec<PathArg> {
    d.path_arguments
        .iter()
        .map(|p| PathArg {
            root_field: p.root_field.clone(),
            root_fallback: p.root_fallback.clone(),
            path_field: p.path_field.clone(),
            op: capped(p.permission.into(), cap),
            across_roots: p.across_roots.map(|a| capped(a.into(), cap)),
            optional: p.optional,
        })
        .collect()
}

/// The roots a tool is offered: every root, or for a third-party tool
/// those its entry names, each with its permissions capped by the entry's
/// `permissions` (a root left with none is not offered).
fn tool_roots(config: &Config, entry: Option<&ComponentEntry>) -> Vec<Arc<Root>> {
    let Some(entry) = entry else {
        return config.roots.clone();
    };
    config
        .roots
        .iter()
        .filter(|r| {
            entry
                .roots
                .as_ref()
                .is_none_or(|names| names.contains(&r.name))
        })
        .filter_map(|r| match entry.cap {
            None => Some(Arc::clone(r)),
            Some(cap) if r.perms.intersect(cap) == r.perms => Some(Arc::clone(r)),
            Some(cap) if r.perms.intersect(cap).is_empty() => None,
            Some(cap) => Some(Arc::new(Root {
                perms: r.perms.intersect(cap),
                ..Root::clone(r)
            })),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::Action;

    fn arguments(v: Value) -> rmcp::model::JsonObject {
        v.as_object().expect("an object").clone()
    }

    #[test]
    fn only_a_search_that_asks_for_documents_goes_to_the_document_reader() {
        let search = Action::Component {
            index: 3,
            paths: vec![],
            documents: Some(7),
        };
        let served = |action: &Action, v: Value| action.component(&arguments(v)).map(|(i, _)| i);
        assert_eq!(served(&search, json!({"documents": true})), Some(7));
        // Anything else stays with the tool's own component, whose schema
        // refuses what is not a boolean.
        for v in [
            json!({}),
            json!({"documents": false}),
            json!({"documents": "true"}),
            json!({"documents": 1}),
            json!({"documents": [true]}),
        ] {
            assert_eq!(served(&search, v.clone()), Some(3), "{v}");
        }
        let other = Action::Component {
            index: 3,
            paths: vec![],
            documents: None,
        };
        assert_eq!(served(&other, json!({"documents": true})), Some(3));
        assert_eq!(served(&Action::ListRoots, json!({})), None);
    }
}
