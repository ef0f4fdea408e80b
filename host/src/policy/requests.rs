//! Which strings of a tool call are paths, and on which root.
//!
//! A component declares its path arguments (`describe`): the field naming
//! the root, the field naming the path, the operation, and a stronger
//! operation when two operands sit on different roots (a move deletes at its
//! source). [`path_requests`] reads those fields out of the model's JSON
//! arguments, so every one of them can go through [`resolve`](super::resolve);
//! anything that is not a string where a string is declared is refused here.
//! A path field written `name[]` is a list: the JSON field `name` holds an
//! array of paths on the one root, each a request of its own ([`LIST`]).
//! Pure: no filesystem, no state.

use serde_json::{Map, Value};

use super::Permission;

/// A path argument, as declared by a component.
#[derive(Clone, Debug)]
pub struct PathArg {
    pub root_field: String,
    /// Where the root is named when `root_field` is absent (`destination_root`
    /// falls back to `root`).
    pub root_fallback: Option<String>,
    pub path_field: String,
    pub op: Permission,
    /// The operation needed instead when the call's operands name different roots.
    pub across_roots: Option<Permission>,
    /// An absent path means the root itself.
    pub optional: bool,
}

/// How a declared path field says it names a list of paths: `paths[]` is
/// the JSON field `paths`, an array of strings.
pub const LIST: &str = "[]";

/// Most paths one list argument may name: each is resolved and audited.
pub const MAX_LIST_PATHS: usize = 256;

impl PathArg {
    /// The JSON field of a list argument (`paths` for `paths[]`), or `None`
    /// for a single path.
    pub fn list_field(&self) -> Option<&str> {
        self.path_field.strip_suffix(LIST)
    }
}

/// One path to resolve: root name, root-relative path, operation, and for
/// an element of a list argument, its field and place in the array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathRequest<'a> {
    pub root: &'a str,
    pub path: &'a str,
    pub op: Permission,
    pub item: Option<(&'a str, usize)>,
    /// The root alone (an empty `path-field`): the tool's paths are not
    /// its arguments.
    pub root_alone: bool,
}

/// The paths a call names, in declaration order, or why the arguments do
/// not fit the declaration.
pub fn path_requests<'a>(
    declared: &'a [PathArg],
    args: &'a Map<String, Value>,
) -> Result<Vec<PathRequest<'a>>, String> {
    let mut named = Vec::with_capacity(declared.len());
    for p in declared {
        let root = match (string_arg(args, &p.root_field, true)?, &p.root_fallback) {
            (Some(root), _) => root,
            (None, Some(fallback)) => string_arg(args, fallback, false)?.unwrap_or_default(),
            (None, None) => string_arg(args, &p.root_field, false)?.unwrap_or_default(),
        };
        match p.list_field() {
            Some(field) => {
                for (i, path) in list_arg(args, field, p.optional)?.into_iter().enumerate() {
                    named.push((root, path, p, Some((field, i))));
                }
            }
            None => {
                let path = string_arg(args, &p.path_field, p.optional)?.unwrap_or_default();
                named.push((root, path, p, None));
            }
        }
    }
    let across = named.windows(2).any(|w| w[0].0 != w[1].0);
    Ok(named
        .into_iter()
        .map(|(root, path, p, item)| PathRequest {
            root,
            path,
            op: match p.across_roots {
                Some(stronger) if across => stronger,
                _ => p.op,
            },
            item,
            root_alone: p.path_field.is_empty(),
        })
        .collect())
}

/// A list of path strings: empty when optional and absent (or null).
fn list_arg<'a>(
    args: &'a Map<String, Value>,
    field: &'a str,
    optional: bool,
) -> Result<Vec<&'a str>, String> {
    let items = match args.get(field) {
        Some(Value::Array(items)) => items,
        None | Some(Value::Null) if optional => return Ok(Vec::new()),
        None | Some(Value::Null) => return Err(format!("invalid arguments: missing '{field}'")),
        Some(_) => {
            return Err(format!(
                "invalid arguments: '{field}' must be an array of strings"
            ));
        }
    };
    if items.len() > MAX_LIST_PATHS {
        return Err(format!(
            "invalid arguments: '{field}' names {} paths; at most {MAX_LIST_PATHS} per call",
            items.len()
        ));
    }
    items
        .iter()
        .map(|v| match v {
            Value::String(s) => Ok(s.as_str()),
            _ => Err(format!(
                "invalid arguments: '{field}' must be an array of strings"
            )),
        })
        .collect()
}

/// A string argument: `Ok(None)` when optional and absent (or null).
fn string_arg<'a>(
    args: &'a Map<String, Value>,
    field: &str,
    optional: bool,
) -> Result<Option<&'a str>, String> {
    match args.get(field) {
        Some(Value::String(s)) => Ok(Some(s)),
        None | Some(Value::Null) if optional => Ok(None),
        None | Some(Value::Null) => Err(format!("invalid arguments: missing '{field}'")),
        Some(_) => Err(format!("invalid arguments: '{field}' must be a string")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn arg(root: &str, fallback: Option<&str>, path: &str, op: Permission) -> PathArg {
        PathArg {
            root_field: root.into(),
            root_fallback: fallback.map(Into::into),
            path_field: path.into(),
            op,
            across_roots: None,
            optional: false,
        }
    }

    fn object(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(o) => o,
            _ => unreachable!(),
        }
    }

    #[test]
    fn string_arguments() {
        let args = object(json!({"root": "docs", "n": 1, "p": null}));
        assert_eq!(string_arg(&args, "root", false), Ok(Some("docs")));
        assert_eq!(string_arg(&args, "path", true), Ok(None));
        assert_eq!(string_arg(&args, "p", true), Ok(None));
        assert_eq!(
            string_arg(&args, "path", false),
            Err("invalid arguments: missing 'path'".to_string())
        );
        assert_eq!(
            string_arg(&args, "n", false),
            Err("invalid arguments: 'n' must be a string".to_string())
        );
    }

    #[test]
    fn a_move_across_roots_needs_the_stronger_operation_at_its_source() {
        let mut source = arg("root", None, "source", Permission::Write);
        source.across_roots = Some(Permission::Delete);
        let declared = [
            source,
            arg(
                "destination_root",
                Some("root"),
                "destination",
                Permission::Write,
            ),
        ];
        let within = object(json!({"root": "a", "source": "x", "destination": "y"}));
        let got = path_requests(&declared, &within).unwrap();
        assert_eq!(
            got,
            [
                PathRequest {
                    root: "a",
                    path: "x",
                    op: Permission::Write,
                    item: None,
                    root_alone: false,
                },
                PathRequest {
                    root: "a",
                    path: "y",
                    op: Permission::Write,
                    item: None,
                    root_alone: false,
                },
            ]
        );
        let across = object(json!({
            "root": "a", "source": "x", "destination": "y", "destination_root": "b"
        }));
        let got = path_requests(&declared, &across).unwrap();
        assert_eq!(got[0].op, Permission::Delete);
        assert_eq!((got[1].root, got[1].op), ("b", Permission::Write));
    }

    #[test]
    fn optional_paths_default_to_the_root_and_wrong_types_are_refused() {
        let mut listing = arg("root", None, "path", Permission::Read);
        listing.optional = true;
        let declared = [listing];
        let just_root = object(json!({"root": "a"}));
        let got = path_requests(&declared, &just_root).unwrap();
        assert_eq!(got[0].path, "");
        for (args, message) in [
            (json!({}), "invalid arguments: missing 'root'"),
            (
                json!({"root": 7}),
                "invalid arguments: 'root' must be a string",
            ),
            (
                json!({"root": "a", "path": ["x"]}),
                "invalid arguments: 'path' must be a string",
            ),
        ] {
            assert_eq!(
                path_requests(&declared, &object(args)),
                Err(message.to_string())
            );
        }
    }

    #[test]
    fn a_list_argument_is_one_request_per_path_and_only_strings() {
        let declared = [arg("root", None, "paths[]", Permission::Read)];
        let args = object(json!({"root": "a", "paths": ["x", "../y"]}));
        let got = path_requests(&declared, &args).unwrap();
        assert_eq!(
            got.iter().map(|r| (r.path, r.item)).collect::<Vec<_>>(),
            [("x", Some(("paths", 0))), ("../y", Some(("paths", 1)))]
        );
        assert!(
            got.iter()
                .all(|r| r.root == "a" && r.op == Permission::Read)
        );
        let too_many: Vec<String> = (0..=MAX_LIST_PATHS).map(|i| i.to_string()).collect();
        for (args, message) in [
            (json!({"root": "a"}), "invalid arguments: missing 'paths'"),
            (
                json!({"root": "a", "paths": "x"}),
                "invalid arguments: 'paths' must be an array of strings",
            ),
            (
                json!({"root": "a", "paths": ["x", {"refused": "forged"}]}),
                "invalid arguments: 'paths' must be an array of strings",
            ),
            (
                json!({"root": "a", "paths": too_many}),
                "invalid arguments: 'paths' names 257 paths; at most 256 per call",
            ),
        ] {
            assert_eq!(
                path_requests(&declared, &object(args)),
                Err(message.to_string())
            );
        }
    }
}
