//! What a built-in tool is: an argument type, a result type, a few facts
//! about itself ([`About`]) and a call, tied together by the [`Tool`] trait,
//! which [`tool!`](crate::tool) implements and exports.
//!
//! The JSON Schemas `describe` hands the host are derived from the two
//! types (schemars), their doc comments becoming the descriptions, so what
//! the model is told and what serde accepts or the call returns cannot
//! drift apart. The wire stays as the WIT has it: schemas as JSON text.
//!
//! Every client puts `tools/list` in front of its model, so the schemas are
//! kept small: no `$schema`, no titles, subschemas inlined, no integer
//! `format`s nor the lower bound 0 schemars gives every unsigned field
//! (they add nothing a client acts on), descriptions on one line.
//! An argument struct with `deny_unknown_fields` gets
//! `additionalProperties: false` (clients' strict modes require it), an
//! enum no `type`, a `false` or `[]` default none; a property that may be absent is
//! described by its type alone (serde also takes a `null` for an optional
//! argument, as "not given").

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::{
    Annotations, Context, DESTRUCTIVE, Descriptor, Image, Output, PathArgument, Permission,
    READ_ONLY, ToolError, parse_args, root_and_path, to_json,
};

/// What a tool says of itself besides its types.
pub struct About {
    /// The tool's name, as clients call it.
    pub name: &'static str,
    /// What the model reads to choose it.
    pub description: &'static str,
    /// The strongest operation it performs.
    pub permission: Permission,
    pub annotations: Annotations,
    /// Which arguments name paths, on which root, for which operation.
    pub path_arguments: Vec<PathArgument>,
}

impl About {
    /// A tool that needs `permission` on the root and path of its `root`
    /// and `path` arguments, with the usual hints: one that reads is
    /// read-only; one that writes or deletes is destructive (the host keeps
    /// what it replaces or removes in the trash).
    pub fn new(name: &'static str, description: &'static str, permission: Permission) -> About {
        let reads = permission == Permission::Read;
        About {
            name,
            description,
            permission,
            annotations: if reads { READ_ONLY } else { DESTRUCTIVE },
            path_arguments: root_and_path(permission, false),
        }
    }

    /// An omitted `path` means the root itself.
    pub fn path_optional(mut self) -> About {
        self.path_arguments
            .iter_mut()
            .for_each(|p| p.optional = true);
        self
    }

    /// Path arguments other than `root` and `path`.
    pub fn paths(mut self, path_arguments: Vec<PathArgument>) -> About {
        self.path_arguments = path_arguments;
        self
    }

    /// A tool that only adds what is missing: it replaces nothing, and
    /// doing it again changes nothing.
    pub fn additive(mut self) -> About {
        self.annotations = Annotations {
            read_only: false,
            destructive: false,
            idempotent: true,
        };
        self
    }
}

/// A built-in tool.
pub trait Tool {
    /// The call's arguments, parsed from its JSON (argument structs use
    /// `#[serde(deny_unknown_fields)]`: a misspelt field is refused).
    type Args: DeserializeOwned + JsonSchema;
    /// The structured result.
    type Result: Serialize + JsonSchema;

    fn about() -> About;

    fn call(ctx: Context, args: Self::Args) -> Result<Answer<Self::Result>, ToolError>;
}

/// A call's answer: its text blocks, the structured result, images.
pub struct Answer<T> {
    pub text: Vec<String>,
    pub result: T,
    pub images: Vec<Image>,
}

impl<T: Serialize> Answer<T> {
    /// One text block and the result.
    pub fn new(text: String, result: T) -> Answer<T> {
        Answer {
            text: vec![text],
            result,
            images: vec![],
        }
    }

    /// The same answer with its result turned into another type (a tool
    /// that serves several commands answers with their common type).
    pub fn map<U: Serialize>(self, f: impl FnOnce(T) -> U) -> Answer<U> {
        Answer {
            text: self.text,
            result: f(self.result),
            images: self.images,
        }
    }

    fn into_output(self) -> Output {
        Output {
            text: self.text,
            structured: Some(to_json(&self.result)),
            images: self.images,
        }
    }
}

/// The schema of a long list in a result: `{"type": "array"}`, its items
/// said by the field's description, with no schema of their own. A client
/// that checks each result against the output schema (the Python SDK does,
/// on every call) then checks such a list once, not item by item: with an
/// item schema, that check cost 15 to 30 ms a listing of 1,000 entries,
/// several times the call itself.
pub fn any_array(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "array"})
}

/// The descriptor of `T`: its [`About`] and the schemas of its types.
pub fn describe<T: Tool>() -> Descriptor {
    let about = T::about();
    Descriptor {
        name: about.name.into(),
        description: about.description.into(),
        input_schema: input_schema::<T::Args>(),
        output_schema: Some(output_schema::<T::Result>()),
        permission: about.permission,
        annotations: about.annotations,
        path_arguments: about.path_arguments,
    }
}

/// Runs one call of `T` on its JSON arguments.
pub fn call<T: Tool>(ctx: Context, arguments: &str) -> Result<Output, ToolError> {
    let args = parse_args::<T::Args>(arguments)?;
    T::call(ctx, args).map(Answer::into_output)
}

/// The schema of what `A` deserialises from.
pub fn input_schema<A: JsonSchema>() -> String {
    to_json(&schema_of::<A>(
        SchemaSettings::draft2020_12().for_deserialize(),
    ))
}

/// The schema of what `R` serialises to, without descriptions and with a
/// list of objects said to be a list only: a client validates structured
/// results with it and the model is not shown it, so the doc comments stay
/// with the Rust types, and a client checks a long list once, not item by
/// item (see [`any_array`]).
pub fn output_schema<R: JsonSchema>() -> String {
    let mut schema = schema_of::<R>(SchemaSettings::draft2020_12().for_serialize());
    undescribed(&mut schema);
    to_json(&schema)
}

/// Removes every `description` from a schema and its subschemas (a
/// property that is itself named `description` stays), and the item
/// schema of every list of objects.
fn undescribed(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if map.get("description").is_some_and(Value::is_string) {
                map.remove("description");
            }
            if map
                .get("items")
                .is_some_and(|i| i.get("properties").is_some())
            {
                map.remove("items");
            }
            map.values_mut().for_each(undescribed);
        }
        Value::Array(items) => items.iter_mut().for_each(undescribed),
        _ => {}
    }
}

fn schema_of<T: JsonSchema>(settings: SchemaSettings) -> Value {
    let mut schema = settings
        .with(|s| {
            s.meta_schema = None;
            s.inline_subschemas = true;
        })
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    if let Value::Object(root) = &mut schema {
        // The type's own doc comment is for readers of the code; the
        // tool's description is the model's.
        root.remove("title");
        root.remove("description");
        // A result of several shapes (an untagged enum of structs) is an
        // `anyOf` of objects; MCP wants an object schema at the top.
        if root.contains_key("anyOf") && !root.contains_key("type") {
            root.insert("type".into(), Value::from("object"));
        }
    }
    compact(&mut schema);
    not_null_when_optional(&mut schema);
    schema
}

/// Removes what a client does not act on from a schema and its subschemas.
fn compact(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            map.remove("title");
            if map.get("type").is_some_and(is_integer) {
                let format = map.remove("format");
                // schemars bounds every unsigned type below by 0; only a
                // bound a field states itself is worth its bytes.
                let unsigned = format.and_then(|f| f.as_str().map(|f| f.starts_with("uint")));
                if unsigned == Some(true) && map.get("minimum") == Some(&Value::from(0)) {
                    map.remove("minimum");
                }
            }
            if let Some(Value::String(text)) = map.get_mut("description") {
                *text = one_line(text);
            }
            // An enum says its type; `false` and `[]` defaults say what
            // leaving an argument out means anyway.
            if map.contains_key("enum") {
                map.remove("type");
            }
            if map
                .get("default")
                .is_some_and(|d| d == &Value::Bool(false) || d == &Value::Array(vec![]))
            {
                map.remove("default");
            }
            for (key, value) in map.iter_mut() {
                match key.as_str() {
                    // Maps of names to schemas: the names are not keywords.
                    "properties" | "$defs" => {
                        if let Value::Object(named) = value {
                            named.values_mut().for_each(compact);
                        }
                    }
                    // Values, not schemas.
                    "enum" | "const" | "default" | "examples" | "required" => {}
                    _ => compact(value),
                }
            }
        }
        // `anyOf`, `oneOf`, `allOf`, `prefixItems`: lists of schemas.
        Value::Array(items) => items.iter_mut().for_each(compact),
        _ => {}
    }
}

/// `"integer"`, or a list of types holding it.
fn is_integer(types: &Value) -> bool {
    types == "integer"
        || types
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t == "integer"))
}

/// A doc comment's lines joined by spaces (paragraphs kept apart).
fn one_line(text: &str) -> String {
    text.split("\n\n")
        .map(|p| p.split('\n').map(str::trim).collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// A property that may be absent is described by its type alone: an
/// argument a model may leave out it leaves out rather than sending
/// `null`, and a result field that may be absent (`skip_serializing_if`)
/// is absent, never `null`.
fn not_null_when_optional(schema: &mut Value) {
    let Value::Object(root) = schema else {
        return;
    };
    let required: Vec<Value> = match root.get("required") {
        Some(Value::Array(r)) => r.clone(),
        _ => vec![],
    };
    let Some(Value::Object(properties)) = root.get_mut("properties") else {
        return;
    };
    for (name, property) in properties.iter_mut() {
        if required.iter().any(|r| r == name.as_str()) {
            continue;
        }
        if let Value::Object(property) = property {
            without_null(property);
        }
    }
}

fn without_null(property: &mut Map<String, Value>) {
    // schemars writes the default of an `Option` with `#[serde(default)]`.
    if property.get("default") == Some(&Value::Null) {
        property.remove("default");
    }
    if let Some(Value::Array(types)) = property.get_mut("type") {
        types.retain(|t| t != "null");
        if let [only] = types.as_slice() {
            let only = only.clone();
            property.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(values)) = property.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    /// The arguments.
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Args {
        /// Name of the root, on two
        /// lines.
        root: String,
        /// Levels.
        #[serde(default)]
        #[schemars(range(min = 1, max = 10))]
        depth: Option<u32>,
        #[serde(default)]
        flag: bool,
    }

    #[derive(Serialize, JsonSchema)]
    struct Out {
        /// Counted.
        count: u64,
        note: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        items: Vec<Item>,
        kind: crate::Kind,
    }

    /// One item.
    #[derive(Serialize, JsonSchema)]
    struct Item {
        title: String,
    }

    fn value(text: &str) -> Value {
        serde_json::from_str(text).expect("a schema is JSON")
    }

    #[test]
    fn an_input_schema_is_strict_and_compact() {
        let schema = value(&input_schema::<Args>());
        let expected = json!({
            "root": {"type": "string", "description": "Name of the root, on two lines."},
            "depth": {"type": "integer", "minimum": 1, "maximum": 10, "description": "Levels."},
            "flag": {"type": "boolean"}
        });
        assert_eq!(schema["properties"], expected);
        assert_eq!(schema["required"], json!(["root"]));
        assert_eq!(schema["additionalProperties"], json!(false));
        // And nothing else: no `$schema`, no title, no description.
        assert_eq!(schema.as_object().map(|o| o.len()), Some(4));
    }

    #[test]
    fn an_output_schema_says_what_is_always_there_and_nothing_more() {
        // No descriptions (the doc comments stay with the types), no type
        // beside an enum.
        assert_eq!(
            value(&output_schema::<Out>()),
            json!({
                "type": "object",
                "properties": {
                    "count": {"type": "integer"},
                    "note": {"type": ["string", "null"]},
                    "mime_type": {"type": "string"},
                    "items": {"type": "array"},
                    "kind": {"enum": [
                        "file", "directory", "symlink", "fifo", "socket", "char_device",
                        "block_device", "unknown"
                    ]}
                },
                "required": ["count", "note", "items", "kind"]
            })
        );
    }

    #[test]
    fn kinds_serialise_by_their_names() {
        // Two words are where serde's renaming and `name` could differ.
        for kind in [
            crate::Kind::CharDevice,
            crate::Kind::BlockDevice,
            crate::Kind::File,
        ] {
            assert_eq!(serde_json::to_value(kind).ok(), Some(json!(kind.name())));
        }
    }
}
