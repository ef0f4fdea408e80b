//! The tools' unit test of their types against docs/tools.md (feature
//! `check`, a dev-dependency only: nothing here is built into a component).
//!
//! The "Example calls" list of docs/tools.md gives, per tool, argument
//! objects a person can copy. [`readme_examples`] checks each one the way a call
//! would meet it: serde parses it into the tool's `Args`, and the input
//! schema the tool advertises accepts it. Together the examples must use
//! every argument the schema lists, so an optional one left without an
//! example fails too. An object with a field no tool knows is refused by
//! both. [`tool!`](crate::tool) writes the test into every tool crate.

use boon::{Compiler, SchemaIndex, Schemas};
use serde_json::Value;

use crate::parse_args;
use crate::tool::{Tool, input_schema, output_schema};

/// Checks `T`'s examples in `readme`, the text of docs/tools.md (see the
/// module); panics naming the example and what refused it.
pub fn readme_examples<T: Tool>(readme: &str) {
    let name = T::about().name;
    let examples = examples_of(readme, name);
    assert!(
        !examples.is_empty(),
        "docs/tools.md gives no example call of {name}"
    );
    let input: Value = parse(&input_schema::<T::Args>());
    let (schemas, index) = compiled(&input);
    // The output schema must be a valid schema too.
    compiled(&parse(&output_schema::<T::Result>()));

    for example in &examples {
        let text = example.to_string();
        if let Err(e) = parse_args::<T::Args>(&text) {
            panic!("{name}: example {text} of docs/tools.md does not parse: {e:?}");
        }
        if let Err(e) = schemas.validate(example, index) {
            panic!("{name}: example {text} of docs/tools.md is refused by the input schema: {e}");
        }
    }

    let listed = input["properties"]
        .as_object()
        .map(|p| p.keys())
        .into_iter();
    for argument in listed.flatten() {
        assert!(
            examples.iter().any(|e| e.get(argument).is_some()),
            "{name}: no example of docs/tools.md uses the argument '{argument}'"
        );
    }

    let mut unknown = examples[0].clone();
    unknown["no_such_argument"] = Value::from(1);
    let text = unknown.to_string();
    assert!(
        parse_args::<T::Args>(&text).is_err(),
        "{name}: serde took {text}"
    );
    assert!(
        schemas.validate(&unknown, index).is_err(),
        "{name}: the input schema took {text}"
    );
}

/// The argument objects the `### Example calls` section of docs/tools.md
/// (up to the next heading) gives for `tool`: each `{...}` in backticks on
/// its item, `- `tool`: ...` (and the item's indented continuation lines).
pub fn examples_of(readme: &str, tool: &str) -> Vec<Value> {
    let section = readme
        .split("\n### Example calls\n")
        .nth(1)
        .and_then(|s| s.split("\n#").next())
        .unwrap_or_default();
    let marker = format!("- `{tool}`:");
    let mut item = String::new();
    let mut lines = section.lines().skip_while(|l| !l.starts_with(&marker));
    if let Some(first) = lines.next() {
        item.push_str(&first[marker.len()..]);
        for more in lines.take_while(|l| l.starts_with("  ")) {
            item.push(' ');
            item.push_str(more.trim());
        }
    }
    item.split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| span.starts_with('{'))
        .map(parse)
        .collect()
}

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON: {text}: {e}"))
}

/// `schema` compiled (checked against its meta-schema on the way).
fn compiled(schema: &Value) -> (Schemas, SchemaIndex) {
    let mut schemas = Schemas::new();
    let mut compiler = Compiler::new();
    compiler
        .add_resource("urn:loomfs:schema", schema.clone())
        .unwrap_or_else(|e| panic!("schema not added: {e}"));
    let index = compiler
        .compile("urn:loomfs:schema", &mut schemas)
        .unwrap_or_else(|e| panic!("not a valid schema: {e:#}\n{schema}"));
    (schemas, index)
}
