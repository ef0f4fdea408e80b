//! A server killed at any step of a publish: the call's files end all old
//! or all new, never mixed, nothing staged is visible under the root, and
//! `trash list` holds each replaced version once. A publish killed before
//! its commit point leaves everything old; after it, a second server that
//! was already running finishes it at its next change in that root, without
//! a restart. Checked for a component of the tests' own writing 20 files
//! and for a 50-file `apply_patch`, with the test hook holding the publish
//! after each step (`LOOMFS_TEST_HOOK_DIR`, `armed` holding the step).

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};

/// `n` files `f00.txt`… in `ws/d`, each holding `old <i>`.
fn files(env: &Env, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let name = format!("d/f{i:02}.txt");
            env.write(&format!("ws/{name}"), format!("old {i}\n"));
            name
        })
        .collect()
}

/// The config of each server (each its own audit log, as two servers
/// must have), and the survivor's.
fn config(env: &Env) -> (PathBuf, PathBuf) {
    env.write("tools/hostile.wasm", deleting_hostile_wasm());
    let text = |audit: &str| {
        format!(
            "audit_log = \"{audit}\"\nmin_free_bytes = 0\n\
             [[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"workspace\"\n{}",
            pinned("tools/hostile.wasm", deleting_hostile_wasm())
        )
    };
    let survivor = env.path("survivor.toml");
    std::fs::write(&survivor, text("survivor-audit.log")).unwrap();
    (env.config(&text("audit.log")), survivor)
}

/// Everything under `ws` but the host's own (`.mcp-trash`), as a file
/// list with contents: what a reader of the root sees.
fn visible(env: &Env) -> Vec<(PathBuf, Option<Vec<u8>>)> {
    let mut all = env.snapshot_of("ws");
    all.retain(|(p, _)| !p.starts_with(".mcp-trash"));
    all
}

/// Runs `tool` with `args` on a server held after publish step `step` and
/// killed there; then `survivor`, a server already running, makes a change
/// in the root (which finishes what the killed one left). Returns whether
/// the publish was held (a step past the last one is never reached).
async fn kill_at(
    env: &Env,
    config: &Path,
    survivor: &Client,
    step: usize,
    tool: &'static str,
    args: Value,
) -> bool {
    let hook = env.path(&format!("hook-{step}"));
    std::fs::create_dir_all(&hook).unwrap();
    std::fs::write(hook.join("armed"), step.to_string()).unwrap();
    let mut cmd = server_command(config);
    cmd.env("LOOMFS_TEST_HOOK_DIR", &hook);
    let (victim, pid, _said) = start_command(cmd).await;
    let victim = Arc::new(victim);
    let pending = tokio::spawn({
        let victim = Arc::clone(&victim);
        async move {
            let _ = try_call(&victim, tool, args.as_object().unwrap().clone()).await;
        }
    });
    let was_held = publish_held(&hook).await;
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    pending.abort();
    let _ = pending.await;
    // The survivor's next change in the root finishes the publish (a
    // server looks for what a stopped one left at most every 2 s).
    tokio::time::sleep(Duration::from_millis(2100)).await;
    call_ok(
        survivor,
        "write_file",
        json!({"root": "ws", "path": format!("trigger-{step}.txt"), "content": "t\n"}),
    )
    .await;
    was_held
}

/// After a kill and a recovery: `names` all hold their old content (`old
/// <i>`) or all hold `new`, nothing staged is visible, and each replaced
/// version is in the trash once when they are new.
fn all_old_or_all_new(
    env: &Env,
    config: &Path,
    names: &[String],
    new: impl Fn(usize) -> String,
    step: usize,
) {
    let contents: Vec<String> = names
        .iter()
        .map(|n| std::fs::read_to_string(env.path(&format!("ws/{n}"))).unwrap())
        .collect();
    let old = contents
        .iter()
        .enumerate()
        .all(|(i, c)| *c == format!("old {i}\n"));
    let renewed = contents.iter().enumerate().all(|(i, c)| *c == new(i));
    assert!(old || renewed, "step {step}: mixed: {contents:?}");
    // Held before its checks, the call had published nothing; held after a
    // step, it had committed: the survivor finished it.
    assert_eq!(renewed, step > 0, "step {step}: {contents:?}");
    for (path, _) in visible(env) {
        let name = path.to_string_lossy();
        assert!(
            !name.contains(".loom-fs"),
            "step {step}: staged file visible: {name}"
        );
    }
    let out = command()
        .args(["trash", "list", "--config"])
        .arg(config)
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    for (i, n) in names.iter().enumerate() {
        let lines = listed
            .lines()
            .filter(|l| l.split('\t').nth(2) == Some(n.as_str()))
            .count();
        assert_eq!(
            lines,
            usize::from(renewed),
            "step {step}: {n} in the trash {lines} times: {listed}"
        );
        if renewed {
            let kept = env
                .trash("ws")
                .into_iter()
                .find(|(_, p, _)| p.ends_with(n))
                .and_then(|(_, _, c)| c)
                .unwrap_or_default();
            assert_eq!(
                String::from_utf8_lossy(&kept),
                format!("old {i}\n"),
                "step {step}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_component_writing_20_files_killed_at_each_step() {
    // 20 files replaced: a link into the trash and a rename each, 40 steps.
    let mut step = 0;
    loop {
        let env = Env::new();
        let names = files(&env, 20);
        let (config, survivor_config) = config(&env);
        let survivor = start(&survivor_config).await;
        let args = json!({"root": "ws", "write_path": "d/f00.txt", "attack": "writes_then",
            "paths": names, "data": "new\n"});
        let was_held = kill_at(&env, &config, &survivor, step, "hostile", args).await;
        all_old_or_all_new(&env, &config, &names, |_| "new\n".to_string(), step);
        survivor.cancel().await.unwrap();
        if !was_held {
            assert!(step > 40, "the publish never reached step {step}");
            break;
        }
        step += 1;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_50_file_apply_patch_killed_at_steps_of_its_publish() {
    for step in [0usize, 1, 2, 49, 50, 51, 99, 100] {
        let env = Env::new();
        let names = files(&env, 50);
        let (config, survivor_config) = config(&env);
        let survivor = start(&survivor_config).await;
        let mut patch = String::from("*** Begin Patch\n");
        for (i, n) in names.iter().enumerate() {
            patch.push_str(&format!("*** Update File: {n}\n@@\n-old {i}\n+new {i}\n"));
        }
        patch.push_str("*** End Patch\n");
        let was_held = kill_at(
            &env,
            &config,
            &survivor,
            step,
            "apply_patch",
            json!({"root": "ws", "patch": patch}),
        )
        .await;
        assert!(was_held, "the publish never reached step {step}");
        all_old_or_all_new(&env, &config, &names, |i| format!("new {i}\n"), step);
        survivor.cancel().await.unwrap();
    }
}
