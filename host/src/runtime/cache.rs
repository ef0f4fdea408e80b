//! Compiled components cached on disk, so a start deserialises (~0.2 ms)
//! instead of compiling (~100 ms per component).
//!
//! A cache file is keyed by the component's SHA-256 and the engine's
//! compatibility hash (wasmtime version and settings), and carries the
//! SHA-256 of its own payload: a truncated, corrupted or foreign file is
//! detected before wasmtime sees it, then rebuilt. Files are written to a
//! temporary name and renamed, so concurrent starts never read half a file.

use std::fs;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

const MAGIC: &[u8; 8] = b"LOOMFSC1";
const HEADER: usize = MAGIC.len() + 32;

/// Where compiled components are kept, if anywhere.
pub struct Cache {
    dir: Option<PathBuf>,
}

impl Cache {
    /// `$LOOMFS_CACHE_DIR`, else `$XDG_CACHE_HOME/loom-fs-mcp`, else
    /// `~/.cache/loom-fs-mcp`; without any, components are compiled at
    /// every start.
    pub fn from_env() -> Cache {
        let var = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let dir = var("LOOMFS_CACHE_DIR")
            .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("loom-fs-mcp")))
            .or_else(|| var("HOME").map(|d| d.join(".cache/loom-fs-mcp")));
        Cache { dir }
    }

    pub fn at(dir: impl Into<PathBuf>) -> Cache {
        Cache {
            dir: Some(dir.into()),
        }
    }

    pub fn none() -> Cache {
        Cache { dir: None }
    }

    /// The compiled form of `wasm`, from the cache or freshly compiled (and
    /// then cached; a cache that cannot be written only costs speed).
    pub fn component(
        &self,
        engine: &Engine,
        name: &str,
        wasm: &[u8],
    ) -> wasmtime::Result<Component> {
        let Some(dir) = &self.dir else {
            return Component::new(engine, wasm);
        };
        let path = dir.join(format!("{name}-{}.cwasm", key(engine, wasm)));
        if let Some(component) = load(engine, &path) {
            return Ok(component);
        }
        let component = Component::new(engine, wasm)?;
        if let Err(e) = store(&path, &component.serialize()?) {
            tracing::warn!(
                "compiled component cache not written ({}): {e}",
                path.display()
            );
        }
        Ok(component)
    }
}

fn key(engine: &Engine, wasm: &[u8]) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    let digest = Sha256::digest(wasm);
    format!("{}-{:016x}", hex(&digest[..16]), h.finish())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A verified cache entry, or `None` (missing, corrupted or incompatible).
fn load(engine: &Engine, path: &Path) -> Option<Component> {
    let bytes = fs::read(path).ok()?;
    if bytes.len() < HEADER || &bytes[..MAGIC.len()] != MAGIC {
        tracing::warn!("ignoring malformed cache file {}", path.display());
        return None;
    }
    let payload = &bytes[HEADER..];
    if Sha256::digest(payload).as_slice() != &bytes[MAGIC.len()..HEADER] {
        tracing::warn!("ignoring corrupted cache file {}", path.display());
        return None;
    }
    // SAFETY: the payload is exactly what `Component::serialize` wrote for
    // this engine configuration (checksum verified above), in the user's own
    // cache directory; wasmtime also checks its own header for compatibility.
    unsafe { Component::deserialize(engine, payload) }
        .inspect_err(|e| tracing::warn!("ignoring unusable cache file {}: {e}", path.display()))
        .ok()
}

fn store(path: &Path, payload: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(MAGIC)?;
    tmp.write_all(&Sha256::digest(payload))?;
    tmp.write_all(payload)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest valid component: the preamble alone.
    const EMPTY_COMPONENT: &[u8] = &[0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];

    #[test]
    fn cached_then_reused_and_corruption_rebuilt() {
        let tmp = tempfile::TempDir::new().unwrap();
        let engine = Engine::default();
        let wasm = EMPTY_COMPONENT;
        let cache = Cache::at(tmp.path());
        cache.component(&engine, "t", wasm).unwrap();
        let files: Vec<_> = fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(files.len(), 1);
        let file = &files[0];
        let first = fs::read(file).unwrap();
        assert!(load(&engine, file).is_some());

        // Flip one payload byte: detected, ignored, rebuilt.
        let mut bad = first.clone();
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        fs::write(file, &bad).unwrap();
        assert!(load(&engine, file).is_none());
        cache.component(&engine, "t", wasm).unwrap();
        assert_eq!(fs::read(file).unwrap(), first);

        // A foreign file in its place is ignored too.
        fs::write(file, b"not a cache file").unwrap();
        assert!(load(&engine, file).is_none());
        cache.component(&engine, "t", wasm).unwrap();
        assert!(load(&engine, file).is_some());
    }
}
