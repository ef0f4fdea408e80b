//! The TOML config: parsed strictly, validated whole, never started degraded.
//!
//! Every table rejects unknown keys, so `base_deny = []` fails at load instead
//! of being ignored (the built-in deny list lives in code and cannot be
//! switched off). Validation collects every problem, each naming its root, and
//! the server refuses to start if there is any.
//!
//! What lives where, in the order a config goes through them:
//! - `parse.rs`: the TOML as written (`RawConfig` and its tables), read
//!   from a file or text with unknown keys refused.
//! - `discover.rs`: what is found on disk and the command line: directories
//!   given as arguments made roots ([`DirArg`]), the git repository a root
//!   offers history of, paths made absolute and real.
//! - `bounds.rs`: every numeric key's default and the range it must lie in.
//! - `validate.rs`: raw config → [`Config`], in named stages (limits, audit
//!   target, roots, components, client roots), every problem collected.
//! - `component.rs`: one `[[components]]` entry validated, and `[trust] keys`.
//! - `validated.rs`: the validated types the rest of the server reads.
//! - `load.rs`: [`Config::load`], [`Config::load_with`], [`Config::parse`]:
//!   reading, directory roots and validation put together.

mod bounds;
mod component;
mod discover;
mod load;
mod parse;
mod validate;
mod validated;

use std::fmt;
use std::path::PathBuf;

pub use bounds::{
    DEFAULT_MAX_READ_BYTES, MAX_CONCURRENT_CALLS, OUTPUT_PER_READ, default_call_limits,
};
pub use discover::DirArg;
pub use validated::{AuditTarget, ClientRoots, ComponentEntry, Config, Limits, QuotaConfig};

/// Why a config was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {path}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config {path} is not valid TOML for loom-fs: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{}", Problems(.0))]
    Invalid(Vec<String>),
}

struct Problems<'a>(&'a [String]);

impl fmt::Display for Problems<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid config:")?;
        for p in self.0 {
            write!(f, "\n  - {p}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
