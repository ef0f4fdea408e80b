//! The ways a [`Config`] is made: from a file, from a file and directories
//! given on the command line, or from text. Each reads (`parse.rs`), adds
//! the directories' roots (`discover.rs`) and validates (`validate.rs`).

use std::path::{Path, PathBuf};

use super::ConfigError;
use super::discover::{DirArg, dir_raw_roots};
use super::parse::{RawConfig, parse_text, read};
use super::validate::validate;
use super::validated::Config;

impl Config {
    /// Reads and validates the config at `path`. `read_only` (the command-line
    /// flag) caps every root at read, as the `read_only` key does.
    pub fn load(path: &Path, read_only: bool) -> Result<Config, ConfigError> {
        Config::load_with(Some(path), &[], false, read_only)
    }

    /// The config at `path` if one is given, with a root for each of `dirs`
    /// besides (named after its last component, see `dir_roots` in
    /// `discover.rs`), all validated together: a directory nested in a
    /// config root, or given twice, is refused as two such roots in the file
    /// would be. Without a file, every other setting takes its default. `/`
    /// is refused unless `allow_filesystem_root`.
    pub fn load_with(
        path: Option<&Path>,
        dirs: &[DirArg],
        allow_filesystem_root: bool,
        read_only: bool,
    ) -> Result<Config, ConfigError> {
        let (mut raw, base) = match path {
            Some(path) => read(path)?,
            None => (RawConfig::default(), PathBuf::from(".")),
        };
        let mut problems = Vec::new();
        let taken: Vec<String> = raw.roots.iter().map(|r| r.name.clone()).collect();
        let dir_roots = dir_raw_roots(dirs, &taken, allow_filesystem_root, &mut problems);
        raw.roots.extend(dir_roots);
        match validate(raw, &base, read_only) {
            Err(ConfigError::Invalid(mut more)) => {
                if !dirs.is_empty() {
                    // Said of a file; the directories' own problems say more.
                    more.retain(|p| !p.starts_with("no roots declared"));
                }
                problems.append(&mut more);
                Err(ConfigError::Invalid(problems))
            }
            _ if !problems.is_empty() => Err(ConfigError::Invalid(problems)),
            result => result,
        }
    }

    /// Parses and validates config text; relative paths resolve against `base`.
    pub fn parse(text: &str, base: &Path, read_only: bool) -> Result<Config, ConfigError> {
        validate(parse_text(text, Path::new(""))?, base, read_only)
    }
}
