//! The official MCP conformance suite (`@modelcontextprotocol/conformance`,
//! pinned with the Node.js it needs in `scripts/conformance/`) against the
//! real binary over Streamable HTTP: every scenario each protocol revision
//! requires (`--requirements 2025-11-25` and `2026-07-28`), on a root of a
//! text file, a PNG and a denied `.env`.
//!
//! The suite tests a server only over HTTP (its `server` command takes a
//! URL; there is no stdio mode), so stdio is covered by the Python SDK and
//! rmcp tests instead. Many scenarios call the fixtures of the SDKs' own
//! test server (tools named `test_*`, prompts, `test://` resources): a
//! filesystem server has none and serves no fake ones, so those fail, each
//! for that reason only. The test holds the outcome exactly: the scenarios
//! that pass, and for each that fails, the reasons its failing checks may
//! give. A scenario that stops passing, or fails for another reason, fails
//! the test; so does one that starts passing (update the table).
//!
//! `scripts/test` installs the suite into `.tools/conformance` (with npm)
//! and names it in `LOOMFS_CONFORMANCE`; without it the test is skipped
//! with a line on stderr.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use serde_json::Value;

/// The scenarios that pass, per revision.
const PASS: &[(&str, &[&str])] = &[
    (
        "2025-11-25",
        &[
            "dns-rebinding-protection",
            "logging-set-level",
            "ping",
            "resources-list",
            "server-initialize",
            "server-session-lifecycle",
            "server-sse-multiple-streams",
            "server-sse-polling",
            "tools-list",
        ],
    ),
    (
        "2026-07-28",
        &[
            "dns-rebinding-protection",
            "http-header-validation",
            "input-required-result-ignore-extra-params",
            "input-required-result-missing-input-response",
            "input-required-result-unsupported-methods",
            "input-required-result-validate-input",
            "resources-list",
            "sep-2164-resource-not-found",
            "server-sse-multiple-streams",
            "tasks-status-notifications",
            "tools-list",
        ],
    ),
];

/// Why a scenario fails: the texts its failing checks may carry.
const FIXTURE_TOOL: &[&str] = &[
    "unknown tool '",
    "Tool 'json_schema_2020_12_tool' not found",
];
const NO_PROMPTS: &[&str] = &[
    "Failed: prompts/list",
    "Failed: prompts/get",
    "error: prompts/get",
];
const FIXTURE_RESOURCE: &[&str] = &["Failed: resource not found: test://"];
const PROMPT_COMPLETION: &[&str] = &["Failed: this server has no prompts to complete"];
const TASKS: &[&str] = &[
    "unknown tool '",
    "capabilities.extensions MUST be advertised",
    "MUST return -32021; got -32601",
    "Not testable: no task was created",
    "expected -32602; got -32601",
    "returned error code -32602; spec requires -32021",
    "routing-task fixture from Check 2 unavailable",
];

/// A scenario that fails, with the texts its failing checks may carry.
type Failing = (&'static str, &'static [&'static str]);

/// The scenarios that fail, per revision, with the reasons allowed.
const FAIL: &[(&str, &[Failing])] = &[
    (
        "2025-11-25",
        &[
            ("completion-complete", PROMPT_COMPLETION),
            ("elicitation-sep1034-defaults", FIXTURE_TOOL),
            ("elicitation-sep1330-enums", FIXTURE_TOOL),
            ("json-schema-2020-12", FIXTURE_TOOL),
            ("prompts-get-embedded-resource", NO_PROMPTS),
            ("prompts-get-simple", NO_PROMPTS),
            ("prompts-get-with-args", NO_PROMPTS),
            ("prompts-get-with-image", NO_PROMPTS),
            ("prompts-list", NO_PROMPTS),
            ("resources-read-binary", FIXTURE_RESOURCE),
            ("resources-read-text", FIXTURE_RESOURCE),
            ("resources-subscribe", FIXTURE_RESOURCE),
            ("resources-templates-read", FIXTURE_RESOURCE),
            ("resources-unsubscribe", FIXTURE_RESOURCE),
            ("tools-call-audio", FIXTURE_TOOL),
            ("tools-call-elicitation", FIXTURE_TOOL),
            ("tools-call-embedded-resource", FIXTURE_TOOL),
            ("tools-call-error", FIXTURE_TOOL),
            ("tools-call-image", FIXTURE_TOOL),
            ("tools-call-mixed-content", FIXTURE_TOOL),
            ("tools-call-sampling", FIXTURE_TOOL),
            ("tools-call-simple-text", FIXTURE_TOOL),
            ("tools-call-with-logging", FIXTURE_TOOL),
            ("tools-call-with-progress", FIXTURE_TOOL),
        ],
    ),
    (
        "2026-07-28",
        &[
            // Only its prompts/list check: the other endpoints carry the hints.
            ("caching", &["prompts/list returned JSON-RPC error -32601"]),
            ("completion-complete", PROMPT_COMPLETION),
            (
                "http-custom-header-server-validation",
                &["server exposes no tool with x-mcp-header annotations"],
            ),
            ("input-required-result-basic-elicitation", FIXTURE_TOOL),
            ("input-required-result-basic-list-roots", FIXTURE_TOOL),
            ("input-required-result-basic-sampling", FIXTURE_TOOL),
            ("input-required-result-capability-check", FIXTURE_TOOL),
            (
                "input-required-result-multi-round",
                &["Expected InputRequiredResult with inputRequests and requestState"],
            ),
            (
                "input-required-result-multiple-input-requests",
                FIXTURE_TOOL,
            ),
            ("input-required-result-non-tool-request", NO_PROMPTS),
            ("input-required-result-request-state", FIXTURE_TOOL),
            ("input-required-result-result-type", FIXTURE_TOOL),
            (
                "input-required-result-tampered-state",
                &["Prerequisite failed: could not get initial InputRequiredResult"],
            ),
            ("json-schema-2020-12", FIXTURE_TOOL),
            ("prompts-get-embedded-resource", NO_PROMPTS),
            ("prompts-get-simple", NO_PROMPTS),
            ("prompts-get-with-args", NO_PROMPTS),
            ("prompts-get-with-image", NO_PROMPTS),
            ("prompts-list", NO_PROMPTS),
            ("resources-read-binary", FIXTURE_RESOURCE),
            ("resources-read-text", FIXTURE_RESOURCE),
            ("resources-templates-read", FIXTURE_RESOURCE),
            // Only its checks that need the suite's diagnostic tools; the
            // rest (request `_meta`, versions, headers, removed and unknown
            // methods answered 404 and -32601, subscriptions) pass.
            ("server-stateless", &["does not list the diagnostic tool"]),
            ("tasks-capability-negotiation", TASKS),
            ("tasks-dispatch-and-envelope", TASKS),
            ("tasks-lifecycle", TASKS),
            ("tasks-mrtr-composition", TASKS),
            ("tasks-mrtr-input", TASKS),
            ("tasks-request-headers", TASKS),
            ("tasks-request-state-removal", TASKS),
            ("tasks-required-task-error", TASKS),
            ("tasks-wire-fields", TASKS),
            ("tools-call-audio", FIXTURE_TOOL),
            ("tools-call-embedded-resource", FIXTURE_TOOL),
            ("tools-call-error", FIXTURE_TOOL),
            ("tools-call-image", FIXTURE_TOOL),
            ("tools-call-mixed-content", FIXTURE_TOOL),
            ("tools-call-simple-text", FIXTURE_TOOL),
            ("tools-call-with-progress", FIXTURE_TOOL),
        ],
    ),
];

/// Node.js and the suite's entry point, as `scripts/test` installed them.
fn suite() -> Option<(PathBuf, PathBuf)> {
    let Some(dir) = std::env::var_os("LOOMFS_CONFORMANCE").map(PathBuf::from) else {
        eprintln!(
            "SKIPPED: the MCP conformance suite is not installed (scripts/test installs it \
             with npm into .tools/conformance and sets LOOMFS_CONFORMANCE)"
        );
        return None;
    };
    let node = dir.join("node_modules/.bin/node");
    let index = dir.join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    assert!(
        node.exists() && index.exists(),
        "LOOMFS_CONFORMANCE={} holds no installed suite (see scripts/test)",
        dir.display()
    );
    Some((node, index))
}

/// The status and message of every check, by scenario, from the suite's
/// output directory (one `server-SCENARIO-TIMESTAMP/checks.json` each).
fn checks(out: &Path) -> BTreeMap<String, Vec<(String, String, String)>> {
    let mut all = BTreeMap::new();
    for entry in std::fs::read_dir(out).unwrap() {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        // `-2026-12-03T05-51-52-607Z`: the run's time, 25 characters.
        let scenario = name
            .strip_prefix("server-")
            .and_then(|s| s.get(..s.len().saturating_sub(25)))
            .unwrap_or_else(|| panic!("unexpected result directory {name}"))
            .to_string();
        let text = std::fs::read_to_string(dir.join("checks.json")).unwrap();
        let list: Vec<Value> = serde_json::from_str(&text).unwrap();
        let checks = list
            .iter()
            .map(|c| {
                let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
                (s("id"), s("status"), s("errorMessage"))
            })
            .collect();
        assert!(all.insert(scenario, checks).is_none(), "{name} twice");
    }
    all
}

#[test]
fn the_official_conformance_suite_passes_what_a_filesystem_server_can() {
    let Some((node, index)) = suite() else {
        return;
    };
    let env = Env::new();
    env.write("docs/guide.txt", "A guide.\n")
        .write("docs/notes/todo.md", "- milk\n")
        .write("docs/pixel.png", PNG)
        .write("docs/.env", "CANARY=1\n");
    let config = env.config("[[roots]]\nname = \"docs\"\npath = \"docs\"\nrole = \"reference\"\n");
    let server = http_server(&config);
    let mut report = Vec::new();
    let mut wrong = Vec::new();
    for (revision, passing) in PASS {
        let failing = FAIL.iter().find(|(r, _)| r == revision).unwrap().1;
        let out = env.path(&format!("conformance-{revision}"));
        let ran = Command::new(&node)
            .arg(&index)
            .args(["server", "--url", &server.url, "--requirements", revision])
            .arg("-o")
            .arg(&out)
            .output()
            .expect("run node");
        // The suite exits 1 when a scenario fails; the checks say which.
        assert!(
            out.exists(),
            "the suite wrote no results: {}",
            String::from_utf8_lossy(&ran.stderr)
        );
        let found = checks(&out);
        for (scenario, checks) in &found {
            let failed: Vec<_> = checks.iter().filter(|c| c.1 == "FAILURE").collect();
            let expected_pass = passing.contains(&scenario.as_str());
            let reasons = failing.iter().find(|(s, _)| s == scenario).map(|(_, r)| *r);
            if failed.is_empty() {
                report.push(format!("{revision} {scenario}: pass"));
                if !expected_pass {
                    wrong.push(format!("{revision} {scenario}: passes, not in PASS"));
                }
                continue;
            }
            for (id, _, message) in &failed {
                report.push(format!("{revision} {scenario}: FAIL {id}: {message}"));
                let explained = reasons.is_some_and(|r| r.iter().any(|m| message.contains(m)));
                if !explained {
                    wrong.push(format!("{revision} {scenario}: {id}: {message}"));
                }
            }
        }
        for scenario in passing
            .iter()
            .copied()
            .chain(failing.iter().map(|(s, _)| *s))
        {
            if !found.contains_key(scenario) {
                wrong.push(format!("{revision} {scenario}: not run"));
            }
        }
    }
    eprintln!("{}", report.join("\n"));
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A 1×1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];
