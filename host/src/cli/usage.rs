//! Each root's disk space and trash against their limits: the lines and
//! warnings `check`, the start of `serve` and `trash list` say of them.

use crate::config::Config;
use crate::policy::{Permission, Root};
use crate::store::trash;
use crate::sys::space;

/// Whether tools may change `root` (so its reserve matters).
pub(super) fn writes(root: &Root) -> bool {
    root.perms.contains(Permission::Write)
}

/// For each root tools may change, its disk's free space against its
/// reserve, as `check` and the start-up lines show them.
pub(super) fn space_lines(config: &Config) -> Vec<String> {
    let width = config.roots.iter().map(|r| r.name.len()).max().unwrap_or(0);
    config
        .roots
        .iter()
        .filter(|r| writes(r))
        .map(|r| {
            let free = space::free_bytes(&r.path).map_or_else(
                |e| format!("free space unknown ({e})"),
                |f| format!("{} free", space::human(f)),
            );
            format!(
                "{:width$}  {free} on its disk, keeps {} (min_free_bytes)",
                r.name,
                space::human(r.min_free_bytes)
            )
        })
        .collect()
}

/// A warning for each root tools may change whose disk has less free than
/// its reserve already.
pub(super) fn below_reserve(config: &Config) -> Vec<String> {
    let mut out = Vec::new();
    for r in config.roots.iter().filter(|r| writes(r)) {
        if let Ok(free) = space::free_bytes(&r.path)
            && free < r.min_free_bytes
        {
            out.push(format!(
                "root '{}': its disk has {} free, below its min_free_bytes ({}): every change \
                 there is refused until space is freed",
                r.name,
                space::human(free),
                space::human(r.min_free_bytes)
            ));
        }
    }
    out
}

/// Whether tools may keep something in `root`'s trash (so its budget
/// matters).
pub(super) fn keeps(root: &Root) -> bool {
    root.perms.contains(Permission::Write) || root.perms.contains(Permission::Delete)
}

/// For each root tools may keep something in (of `only`, if named), its
/// trash against its budget (`check`, the start-up lines and `trash list`
/// show them), and a warning for each at [`trash::WARN_PERCENT`] of its
/// budget or past it. `usage` counts a root's trash: a walk, or the
/// server's count taken at start.
pub(super) fn trash_usage(
    config: &Config,
    only: Option<&str>,
    usage: impl Fn(&Root) -> std::io::Result<trash::Usage>,
) -> (Vec<String>, Vec<String>) {
    let roots = config
        .roots
        .iter()
        .filter(|r| keeps(r) && only.is_none_or(|name| name == r.name));
    let width = config.roots.iter().map(|r| r.name.len()).max().unwrap_or(0);
    let (mut lines, mut warnings) = (Vec::new(), Vec::new());
    for r in roots {
        match usage(r) {
            Ok(usage) => {
                lines.push(format!("{:width$}  trash holds {}", r.name, usage.text()));
                warnings.extend(usage.warning(&r.name));
            }
            Err(e) => lines.push(format!(
                "{:width$}  trash size unknown ({e}); trash_max_bytes {}",
                r.name,
                space::human(r.trash_max_bytes)
            )),
        }
    }
    (lines, warnings)
}
