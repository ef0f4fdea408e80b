//! Compiled components cached on disk, so a start maps compiled code
//! (a fraction of a millisecond) instead of compiling (~100 ms per component).
//!
//! An entry is `<name>-<key>.cwasm`, the artifact exactly as wasmtime
//! serialised it (so it can be mapped, not copied), plus `<name>-<key>.crc`
//! holding its length and CRC-32. The key is the engine's compatibility hash
//! (wasmtime version and settings) and, for a third-party component, the
//! SHA-256 of its bytes (the digest its `[[components]]` entry pins, already
//! computed); for a built-in one, embedded in the binary, their CRC-32 and
//! length (hashing the built-ins' ~9 MiB at every start would cost more). A
//! truncated, corrupted or foreign file fails the check before wasmtime sees
//! it, and is rebuilt. Entries are written under temporary names and renamed,
//! so concurrent starts never read half a file; older entries of the same
//! component are removed when a new one is written.

use std::fs;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::component::Component;

/// Where compiled components are kept, if anywhere.
pub struct Cache {
    dir: Option<PathBuf>,
    /// Entries are read, never written (a sandboxed server: what it wrote
    /// would run in later starts).
    read_only: bool,
    /// Whether a component was compiled because it was not cached.
    missed: std::sync::atomic::AtomicBool,
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
        Cache::with(dir)
    }

    pub fn at(dir: impl Into<PathBuf>) -> Cache {
        Cache::with(Some(dir.into()))
    }

    pub fn none() -> Cache {
        Cache::with(None)
    }

    fn with(dir: Option<PathBuf>) -> Cache {
        Cache {
            dir,
            read_only: false,
            missed: Default::default(),
        }
    }

    /// The same cache, read but never written.
    pub fn read_only(self) -> Cache {
        Cache {
            read_only: true,
            ..self
        }
    }

    /// Whether some component had to be compiled (it was not cached).
    pub fn missed(&self) -> bool {
        self.missed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The directory entries go to, if any (the kernel sandbox grants it).
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The compiled form of `wasm`, from the cache or freshly compiled (and
    /// then cached unless read-only; a cache that cannot be written only
    /// costs speed).
    pub fn component(
        &self,
        engine: &Engine,
        name: &str,
        wasm: &[u8],
    ) -> wasmtime::Result<Component> {
        let id = format!("{:08x}{:08x}", crc32fast::hash(wasm), wasm.len() as u32);
        self.component_of(engine, name, wasm, &id)
    }

    /// [`Cache::component`] of bytes whose SHA-256 (`digest`, hex) the
    /// caller has already computed: the cache entry is found by it (and
    /// the engine's hash).
    pub fn component_of(
        &self,
        engine: &Engine,
        name: &str,
        wasm: &[u8],
        digest: &str,
    ) -> wasmtime::Result<Component> {
        let Some(dir) = &self.dir else {
            return Component::new(engine, wasm);
        };
        let stem = format!("{name}-{}", key(engine, digest));
        let artifact = dir.join(format!("{stem}.cwasm"));
        let check = dir.join(format!("{stem}.crc"));
        if let Some(component) = load(engine, &artifact, &check) {
            return Ok(component);
        }
        self.missed
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let component = Component::new(engine, wasm)?;
        if self.read_only {
            return Ok(component);
        }
        match store(dir, &stem, &component.serialize()?) {
            Ok(()) => prune(dir, name, &stem),
            Err(e) => tracing::warn!(
                "compiled component cache not written ({}): {e}",
                artifact.display()
            ),
        }
        Ok(component)
    }
}

fn key(engine: &Engine, digest: &str) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    format!("{digest}-{:016x}", h.finish())
}

/// The check record of an artifact: its length and CRC-32.
fn check_record(bytes: &[u8]) -> [u8; 12] {
    let mut record = [0u8; 12];
    record[..8].copy_from_slice(&(bytes.len() as u64).to_le_bytes());
    record[8..].copy_from_slice(&crc32fast::hash(bytes).to_le_bytes());
    record
}

/// A verified cache entry, or `None` (missing, corrupted or incompatible).
fn load(engine: &Engine, artifact: &Path, check: &Path) -> Option<Component> {
    let expected = fs::read(check).ok()?;
    let file = fs::File::open(artifact).ok()?;
    let len = usize::try_from(file.metadata().ok()?.len()).ok()?;
    if len == 0 {
        return None;
    }
    // SAFETY: a private read-only mapping of a file we only read from; it is
    // dropped before the file is used again.
    let mapped = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            len,
            rustix::mm::ProtFlags::READ,
            rustix::mm::MapFlags::PRIVATE,
            &file,
            0,
        )
    }
    .ok()?;
    // SAFETY: `mapped` points at `len` readable bytes until the munmap below.
    let record = check_record(unsafe { std::slice::from_raw_parts(mapped.cast::<u8>(), len) });
    // SAFETY: unmapping exactly what was mapped above.
    let _ = unsafe { rustix::mm::munmap(mapped, len) };
    if expected != record {
        tracing::warn!("ignoring corrupted cache file {}", artifact.display());
        return None;
    }
    // SAFETY: the file is exactly what `Component::serialize` wrote for this
    // engine configuration (length and checksum verified above), in the
    // user's own cache directory; wasmtime also checks its own header.
    unsafe { Component::deserialize_file(engine, artifact) }
        .inspect_err(|e| tracing::warn!("ignoring unusable cache file {}: {e}", artifact.display()))
        .ok()
}

fn store(dir: &Path, stem: &str, artifact: &[u8]) -> std::io::Result<()> {
    fs::create_dir_all(dir)?;
    let write = |suffix: &str, bytes: &[u8]| -> std::io::Result<()> {
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        tmp.write_all(bytes)?;
        tmp.persist(dir.join(format!("{stem}.{suffix}")))
            .map_err(|e| e.error)?;
        Ok(())
    };
    // The artifact first: a check record never describes a missing file.
    write("cwasm", artifact)?;
    write("crc", &check_record(artifact))
}

/// Removes other entries of component `name` (older versions).
fn prune(dir: &Path, name: &str, keep: &str) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let prefix = format!("{name}-");
    for entry in entries.flatten() {
        let file = entry.file_name();
        let file = file.to_string_lossy();
        let stem = file
            .strip_suffix(".cwasm")
            .or_else(|| file.strip_suffix(".crc"));
        if let Some(stem) = stem
            && stem != keep
            && stem
                .strip_prefix(&prefix)
                .is_some_and(|key| key.chars().all(|c| c.is_ascii_hexdigit() || c == '-'))
        {
            let _ = fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest valid component: the preamble alone.
    const EMPTY_COMPONENT: &[u8] = &[0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];

    fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
        fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with(suffix))
            .collect()
    }

    #[test]
    fn cached_then_reused_and_corruption_rebuilt() {
        let tmp = tempfile::TempDir::new().unwrap();
        let engine = Engine::default();
        let cache = Cache::at(tmp.path());
        cache.component(&engine, "t", EMPTY_COMPONENT).unwrap();
        let artifacts = files(tmp.path(), ".cwasm");
        assert_eq!(artifacts.len(), 1);
        let artifact = &artifacts[0];
        let check = artifact.with_extension("crc");
        let first = fs::read(artifact).unwrap();
        assert!(load(&engine, artifact, &check).is_some());

        // Flip one byte: detected, ignored, rebuilt identically.
        let mut bad = first.clone();
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        fs::write(artifact, &bad).unwrap();
        assert!(load(&engine, artifact, &check).is_none());
        cache.component(&engine, "t", EMPTY_COMPONENT).unwrap();
        assert_eq!(fs::read(artifact).unwrap(), first);

        // Truncated, or a foreign file in its place: ignored too.
        fs::write(artifact, &first[..first.len() / 2]).unwrap();
        assert!(load(&engine, artifact, &check).is_none());
        fs::write(artifact, b"not a cache file").unwrap();
        assert!(load(&engine, artifact, &check).is_none());
        cache.component(&engine, "t", EMPTY_COMPONENT).unwrap();
        assert!(load(&engine, artifact, &check).is_some());
    }

    #[test]
    fn a_read_only_cache_reads_and_never_writes() {
        let tmp = tempfile::TempDir::new().unwrap();
        let engine = Engine::default();
        let reader = Cache::at(tmp.path()).read_only();
        reader.component(&engine, "t", EMPTY_COMPONENT).unwrap();
        assert!(reader.missed());
        assert!(
            fs::read_dir(tmp.path()).unwrap().next().is_none(),
            "nothing written"
        );
        let writer = Cache::at(tmp.path());
        writer.component(&engine, "t", EMPTY_COMPONENT).unwrap();
        let reader = Cache::at(tmp.path()).read_only();
        reader.component(&engine, "t", EMPTY_COMPONENT).unwrap();
        assert!(!reader.missed(), "served from the cache");
    }

    /// A third-party component's entry is found by its SHA-256: the
    /// digest its pin was checked against names the file.
    #[test]
    fn a_third_party_entry_is_named_by_its_digest() {
        let tmp = tempfile::TempDir::new().unwrap();
        let digest = crate::runtime::admit::sha256_hex(EMPTY_COMPONENT);
        Cache::at(tmp.path())
            .component_of(&Engine::default(), "ext-t", EMPTY_COMPONENT, &digest)
            .unwrap();
        let artifacts = files(tmp.path(), ".cwasm");
        assert_eq!(artifacts.len(), 1);
        let name = artifacts[0]
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(name.starts_with(&format!("ext-t-{digest}-")), "{name}");
    }

    #[test]
    fn older_entries_are_pruned() {
        let tmp = tempfile::TempDir::new().unwrap();
        for stale in ["t-0000-1.cwasm", "t-0000-1.crc", "other-0000-1.cwasm"] {
            fs::write(tmp.path().join(stale), b"x").unwrap();
        }
        Cache::at(tmp.path())
            .component(&Engine::default(), "t", EMPTY_COMPONENT)
            .unwrap();
        assert_eq!(
            files(tmp.path(), ".cwasm").len(),
            2,
            "t's new entry and other's"
        );
        assert!(!tmp.path().join("t-0000-1.crc").exists());
        assert!(tmp.path().join("other-0000-1.cwasm").exists());
    }
}
