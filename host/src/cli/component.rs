//! `loom-fs-mcp component inspect|add FILE`: what a component file is and
//! whether the server would accept it, and the `[[components]]` entry that
//! pins it. Neither needs a config, nor changes any file: the operator
//! pastes the entry.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::policy::Permission;
use crate::runtime::{self, Budget, Runtime};
use crate::tools::declaration_problem;

/// What a file is, as `inspect` tells it.
struct Report {
    file: PathBuf,
    digest: String,
    kind: &'static str,
    imports: Vec<String>,
    exports: Vec<String>,
    descriptor: Option<runtime::Descriptor>,
    /// Why the server would refuse it, if it would.
    refused: Option<String>,
}

/// Reads, hashes and judges `file` as a start would (without a config:
/// only what the file itself decides).
fn report(file: &Path) -> anyhow::Result<Report> {
    let wasm = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let (memory_bytes, timeout, output_bytes) = crate::config::default_call_limits();
    let mut runtime = Runtime::new(Budget {
        memory_bytes,
        timeout,
        output_bytes,
    })
    .map_err(|e| anyhow::anyhow!("cannot start the WebAssembly runtime: {e}"))?;
    let mut report = Report {
        file: file.to_path_buf(),
        digest: runtime::admit::sha256_hex(&wasm),
        kind: "component",
        imports: Vec::new(),
        exports: Vec::new(),
        descriptor: None,
        refused: None,
    };
    if let Err(why) = runtime::check_component_bytes(&wasm) {
        report.refused = Some(why);
        if wasm.starts_with(b"\0asm\x01\0\0\0") {
            report.kind = "core WebAssembly module";
            match wasmtime::Module::new(runtime.engine(), &wasm) {
                Ok(module) => {
                    report.imports = module
                        .imports()
                        .map(|i| format!("{}::{}", i.module(), i.name()))
                        .collect();
                    report.exports = module.exports().map(|e| e.name().to_string()).collect();
                }
                Err(e) => report.refused = Some(format!("is not a valid core module: {e}")),
            }
        } else {
            report.kind = "not WebAssembly";
        }
        return Ok(report);
    }
    let component = match wasmtime::component::Component::new(runtime.engine(), &wasm) {
        Ok(component) => component,
        Err(e) => {
            report.refused = Some(format!("does not compile: {e}"));
            return Ok(report);
        }
    };
    (report.imports, report.exports) = runtime::interface(runtime.engine(), &component);
    match runtime.load(&component, file.display().to_string()) {
        Ok(index) => {
            let descriptor = runtime.tools()[index].descriptor.clone();
            report.refused = declaration_problem(&descriptor);
            report.descriptor = Some(descriptor);
        }
        Err(e) => report.refused = Some(format!("{e}")),
    }
    Ok(report)
}

pub(super) fn inspect(file: &Path) -> anyhow::Result<()> {
    let r = report(file)?;
    println!("file: {}", r.file.display());
    println!("sha256: {}", r.digest);
    println!("kind: {}", r.kind);
    for (heading, names) in [("imports", &r.imports), ("exports", &r.exports)] {
        if names.is_empty() {
            println!("{heading}: (none)");
        } else {
            println!("{heading}:");
            for n in names {
                println!("  {n}");
            }
        }
    }
    if let Some(d) = &r.descriptor {
        println!("name: {}", d.name.escape_debug());
        println!("description: {}", d.description.escape_debug());
        println!("permission: {}", Permission::from(d.permission));
        if d.path_arguments.is_empty() {
            println!("path arguments: (none)");
        } else {
            println!("path arguments:");
            for p in &d.path_arguments {
                let mut line = format!(
                    "  {} in {}: {}",
                    p.path_field.escape_debug(),
                    p.root_field.escape_debug(),
                    Permission::from(p.permission)
                );
                if let Some(a) = p.across_roots {
                    line += &format!(", {} across roots", Permission::from(a));
                }
                if p.optional {
                    line += ", optional";
                }
                println!("{line}");
            }
        }
        println!("input schema: {}", schema_line(&d.input_schema));
        match &d.output_schema {
            Some(s) => println!("output schema: {}", schema_line(s)),
            None => println!("output schema: (none)"),
        }
    }
    match &r.refused {
        None => {
            println!("accepted: yes (`loom-fs-mcp component add` prints its pinned entry)");
            Ok(())
        }
        Some(why) => {
            println!("accepted: no: it {why}");
            anyhow::bail!("{} would be refused: it {why}", r.file.display())
        }
    }
}

pub(super) fn add(file: &Path) -> anyhow::Result<()> {
    let r = report(file)?;
    if let Some(why) = &r.refused {
        anyhow::bail!("{} would be refused: it {why}", r.file.display());
    }
    let path = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
    let Some(text) = path.to_str() else {
        anyhow::bail!(
            "{} is not valid UTF-8: a config cannot name it",
            path.display()
        );
    };
    let d = r.descriptor.as_ref();
    println!("[[components]]");
    println!("path = {}", toml::Value::String(text.into()));
    println!("sha256 = \"{}\"", r.digest);
    let mut signature = path.as_os_str().to_owned();
    signature.push(".minisig");
    if Path::new(&signature).is_file() {
        println!(
            "# {} is beside it: with its author's public key in [trust] keys,",
            Path::new(&signature).display()
        );
        println!("# signed = true");
    }
    if let Some(d) = d.filter(|d| Permission::from(d.permission) != Permission::Read) {
        println!(
            "# It declares {}; to let it only read: permissions = [\"read\"]",
            Permission::from(d.permission)
        );
    }
    println!("# To offer it some roots only: roots = [\"NAME\"]");
    Ok(())
}

/// A schema the component declares, on one line: compact JSON when it
/// parses (the host refuses one that does not, and `accepted` says so),
/// else the text escaped; either way without what would act on a terminal
/// (the component's text is not ours).
fn schema_line(schema: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(schema) {
        Ok(value) => crate::policy::neutralised(&value.to_string()).into_owned(),
        Err(_) => schema.escape_debug().to_string(),
    }
}
