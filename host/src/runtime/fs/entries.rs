//! The WASI interfaces around descriptors: preopens (the call's mounts),
//! error codes, what a stat shows, and directory entry streams, which skip
//! every denied name so a listing never shows one.
//!
//! The other host traits of `PolicedFs` (`preopens::Host`, `fs::Host`,
//! `fs::HostDirectoryEntryStream`), each whole: small ones, apart from the
//! descriptor methods (`descriptor.rs`).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::FileType;
use wasmtime::component::Resource;
use wasmtime_wasi::filesystem::Descriptor;
use wasmtime_wasi::p2::bindings::filesystem::preopens;
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;
use wasmtime_wasi::p2::bindings::sync::filesystem::types as fs;
use wasmtime_wasi::p2::bindings::sync::io::streams;
use wasmtime_wasi::p2::{FsError, FsResult};

use super::{DirStream, Handle, Place, PolicedFs, io_error, raw_fd, real_path, wasi_file_type};
use crate::policy::{Permission, Rule};
use crate::runtime::meter::OutOfQuota;

/// What a guest is told about a directory: its type and times, but a link
/// count of 1 and a size of 0 whatever the filesystem says (and a symlink's
/// size as 0). Both count the
/// entries in it (a subdirectory adds a link; on tmpfs each entry adds to
/// the size), hidden ones included: the guest must not learn that a `.git`
/// or a `.venv` is there from the numbers of its parent.
pub(super) fn as_seen(mut stat: fs::DescriptorStat) -> fs::DescriptorStat {
    match stat.type_ {
        fs::DescriptorType::Directory => {
            stat.link_count = 1;
            stat.size = 0;
        }
        // A symlink's size is the length of its target, which `readlink`
        // keeps to itself where it points out or at a denied name.
        fs::DescriptorType::SymbolicLink => stat.size = 0,
        _ => {}
    }
    stat
}

impl preopens::Host for PolicedFs<'_> {
    fn get_directories(&mut self) -> wasmtime::Result<Vec<(Resource<Descriptor>, String)>> {
        let dirs = preopens::Host::get_directories(&mut self.fs)?;
        for (fd, name) in &dirs {
            let Some(mount) = self.guard.mounts.iter().position(|m| &m.guest_dir == name) else {
                continue;
            };
            // The preopen must be the very directory meant: a root swapped
            // for a symlink, or a `.mcp-trash` planted as one, is left
            // untracked, so every use of it is refused.
            let opened = raw_fd(self.fs.table.get(fd)?);
            if real_path(opened).as_deref() == Some(self.guard.mounts[mount].host.as_path()) {
                self.guard.handles.insert(
                    fd.rep(),
                    Handle {
                        mount,
                        rel: PathBuf::new(),
                    },
                );
            } else {
                let root = Some(mount);
                self.guard
                    .refuse(root, Path::new(""), Permission::Read, Rule::Confinement);
            }
        }
        Ok(dirs)
    }
}

impl fs::Host for PolicedFs<'_> {
    fn convert_error_code(&mut self, err: FsError) -> wasmtime::Result<fs::ErrorCode> {
        fs::Host::convert_error_code(&mut self.fs, err)
    }

    fn filesystem_error_code(
        &mut self,
        err: Resource<streams::Error>,
    ) -> wasmtime::Result<Option<fs::ErrorCode>> {
        if self
            .fs
            .table
            .get(&err)?
            .downcast_ref::<OutOfQuota>()
            .is_some()
        {
            return Ok(Some(fs::ErrorCode::Quota));
        }
        fs::Host::filesystem_error_code(&mut self.fs, err)
    }
}

impl fs::HostDirectoryEntryStream for PolicedFs<'_> {
    fn read_directory_entry(
        &mut self,
        stream: Resource<fs::DirectoryEntryStream>,
    ) -> FsResult<Option<fs::DirectoryEntry>> {
        let Some(h) = self.guard.streams.get(&stream.rep()) else {
            return Err(self.guard.refuse(
                None,
                Path::new(""),
                Permission::Read,
                Rule::UntrackedDescriptor,
            ));
        };
        let mount = &self.guard.mounts[h.mount];
        let deny = &mount.root.deny;
        // Above the client roots, only the names on the way to one.
        let area = mount
            .area
            .as_ref()
            .filter(|a| a.place(&h.rel) != Place::Inside);
        let rel = &h.rel;
        let s = self.fs.table.get_mut(&DirStream::of(&stream))?;
        loop {
            if let Some(&(end, type_)) = s.ahead.get(s.given) {
                s.given += 1;
                let name = &s.names[s.start..end];
                s.start = end;
                return match type_ {
                    Some(type_) => Ok(Some(fs::DirectoryEntry {
                        type_,
                        name: name.to_string(),
                    })),
                    None => Err(ErrorCode::IllegalByteSequence.into()),
                };
            }
            if s.done {
                // Nothing more to hold.
                (s.names, s.ahead) = Default::default();
                return Ok(None);
            }
            // The next read's entries, those the guest may see.
            s.names.clear();
            s.ahead.clear();
            (s.given, s.start) = (0, 0);
            let (names, ahead, listing) = (&mut s.names, &mut s.ahead, s.listing);
            let listed = &mut self.guard.listed;
            let Some(source) = s.source.as_mut() else {
                s.done = true;
                continue;
            };
            let more = source.read(&mut self.guard.scratch, |dir, name, file_type| {
                let os = OsStr::from_bytes(name);
                // Denied names are never seen, let alone looked at (nor
                // told apart by their bytes).
                if deny.hides(os) || area.is_some_and(|a| !a.shows(rel, os)) {
                    return;
                }
                let Ok(name) = std::str::from_utf8(name) else {
                    ahead.push((names.len(), None));
                    return;
                };
                let type_ = match file_type {
                    // An entry name is one component: no traversal is
                    // possible.
                    FileType::Unknown => {
                        rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                            .map_or(fs::DescriptorType::Unknown, |st| {
                                wasi_file_type(crate::sys::stat::file_type(&st))
                            })
                    }
                    t => wasi_file_type(t),
                };
                if type_ == fs::DescriptorType::RegularFile
                    && let Some(listing) = listing
                {
                    listed.add(listing, name);
                }
                names.push_str(name);
                ahead.push((names.len(), Some(type_)));
            });
            match more {
                Ok(more) => {
                    s.done = !more;
                    if let (true, Some(listing)) = (s.done, listing) {
                        self.guard.listed.complete(listing);
                    }
                }
                // What failed is not read again.
                Err(e) => {
                    s.done = true;
                    return Err(io_error(e));
                }
            }
        }
    }

    fn drop(&mut self, stream: Resource<fs::DirectoryEntryStream>) -> wasmtime::Result<()> {
        self.guard.streams.remove(&stream.rep());
        self.fs.table.delete(DirStream::of(&stream))?;
        Ok(())
    }
}
