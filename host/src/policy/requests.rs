//! Which strings of a tool call are paths, and on which root.
//!
//! A component declares its path arguments (`describe`): the field naming
//! the root, the field naming the path, the operation, and a stronger
//! operation when two operands sit on different roots (a move deletes at its
//! source). [`path_requests`] reads those fields out of the model's JSON
//! arguments, so every one of them can go through [`resolve`](super::resolve);
//! anything that is not a string where a string is declared is refused here.
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

/// One path to resolve: root name, root-relative path, operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathRequest<'a> {
    pub root: &'a str,
    pub path: &'a str,
    pub op: Permission,
}

/// The paths a call names, in declaration order, or why the arguments do
/// not fit the declaration.
pub fn path_requests<'a>(
    declared: &[PathArg],
    args: &'a Map<String, Value>,
) -> Result<Vec<PathRequest<'a>>, String> {
    let mut named = Vec::with_capacity(declared.len());
    for p in declared {
        let root = match (string_arg(args, &p.root_field, true)?, &p.root_fallback) {
            (Some(root), _) => root,
            (None, Some(fallback)) => string_arg(args, fallback, false)?.unwrap_or_default(),
            (None, None) => string_arg(args, &p.root_field, false)?.unwrap_or_default(),
        };
        let path = string_arg(args, &p.path_field, p.optional)?.unwrap_or_default();
        named.push((root, path, p));
    }
    let across = named.windows(2).any(|w| w[0].0 != w[1].0);
    Ok(named
        .into_iter()
        .map(|(root, path, p)| PathRequest {
            root,
            path,
            op: match p.across_roots {
                Some(stronger) if across => stronger,
                _ => p.op,
            },
        })
        .collect())
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
                    op: Permission::Write
                },
                PathRequest {
                    root: "a",
                    path: "y",
                    op: Permission::Write
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
}
