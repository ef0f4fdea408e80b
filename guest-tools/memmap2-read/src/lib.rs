//! `memmap2`'s read-only API over a plain read: the history guest's stand-in
//! for the crate gitoxide maps pack, index, loose-object, packed-refs and
//! commit-graph files with. WASI has no `mmap` (the real crate's fallback
//! answers `Unsupported`, and every packed object is then unreadable), so a
//! "map" here is the file's bytes read into memory once, through the same
//! filesystem calls as any other read (the host's policing filesystem sees and
//! meters them). Only what gitoxide calls is here: `MmapOptions::new()`,
//! `map` and `map_copy_read_only` of a whole file (with `offset`/`len` if set),
//! and `Mmap` as a byte slice.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::ops::Deref;

/// A file's bytes, read whole (or the range the options name).
pub struct Mmap {
    bytes: Box<[u8]>,
}

impl Mmap {
    /// # Safety
    /// Nothing unsafe happens; the signature is the real crate's.
    pub unsafe fn map(file: &File) -> io::Result<Mmap> {
        MmapOptions::new().read(file)
    }
}

impl Deref for Mmap {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl AsRef<[u8]> for Mmap {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl std::fmt::Debug for Mmap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mmap")
            .field("len", &self.bytes.len())
            .finish()
    }
}

/// Which part of a file to read.
#[derive(Clone, Debug, Default)]
pub struct MmapOptions {
    offset: u64,
    len: Option<usize>,
}

impl MmapOptions {
    pub fn new() -> MmapOptions {
        MmapOptions::default()
    }

    pub fn offset(&mut self, offset: u64) -> &mut Self {
        self.offset = offset;
        self
    }

    pub fn len(&mut self, len: usize) -> &mut Self {
        self.len = Some(len);
        self
    }

    /// # Safety
    /// Nothing unsafe happens; the signature is the real crate's.
    pub unsafe fn map(&self, file: &File) -> io::Result<Mmap> {
        self.read(file)
    }

    /// # Safety
    /// Nothing unsafe happens; the signature is the real crate's.
    pub unsafe fn map_copy_read_only(&self, file: &File) -> io::Result<Mmap> {
        self.read(file)
    }

    /// The range's bytes, exactly: a range past the end of the file is an
    /// error, as a map past it would fault on the first touch.
    fn read(&self, mut file: &File) -> io::Result<Mmap> {
        let size = file.metadata()?.len();
        let available = size.checked_sub(self.offset).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "offset past the end of the file",
            )
        })?;
        let len = match self.len {
            Some(len) if len as u64 > available => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "range past the end of the file",
                ));
            }
            Some(len) => len,
            None => usize::try_from(available)
                .map_err(|_| io::Error::new(io::ErrorKind::OutOfMemory, "file too large"))?,
        };
        let mut bytes = Vec::new();
        bytes
            .try_reserve_exact(len)
            .map_err(|_| io::Error::from(io::ErrorKind::OutOfMemory))?;
        // A map leaves the file's position alone (gitoxide reads an index
        // file on from where it was after mapping it): put it back.
        let position = file.stream_position()?;
        file.seek(SeekFrom::Start(self.offset))?;
        let read = file.take(len as u64).read_to_end(&mut bytes);
        file.seek(SeekFrom::Start(position))?;
        read?;
        if bytes.len() != len {
            // The file shrank between the size and the read.
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        Ok(Mmap {
            bytes: bytes.into_boxed_slice(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_with(content: &[u8]) -> File {
        let dir = std::env::temp_dir().join(format!("memmap2-read-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{}", content.len()));
        File::create(&path).unwrap().write_all(content).unwrap();
        File::open(&path).unwrap()
    }

    #[test]
    fn a_whole_file_is_its_bytes() {
        let file = file_with(b"PACK and more");
        let map = unsafe { MmapOptions::new().map_copy_read_only(&file) }.unwrap();
        assert_eq!(&*map, b"PACK and more");
        let empty = file_with(b"");
        assert!(unsafe { Mmap::map(&empty) }.unwrap().is_empty());
    }

    #[test]
    fn a_range_is_exact_and_never_past_the_end() {
        let file = file_with(b"0123456789abcdef");
        let map = unsafe { MmapOptions::new().offset(4).len(3).map(&file) }.unwrap();
        assert_eq!(&*map, b"456");
        let past = unsafe { MmapOptions::new().offset(10).len(7).map(&file) };
        assert_eq!(past.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
        assert!(unsafe { MmapOptions::new().offset(17).map(&file) }.is_err());
    }

    #[test]
    fn a_map_leaves_the_files_position_alone() {
        let mut file = file_with(b"the position stays");
        let mut start = [0u8; 4];
        file.read_exact(&mut start).unwrap();
        let map = unsafe { MmapOptions::new().map_copy_read_only(&file) }.unwrap();
        assert_eq!(map.len(), 18);
        let mut rest = String::new();
        file.read_to_string(&mut rest).unwrap();
        assert_eq!(rest, "position stays");
    }
}
