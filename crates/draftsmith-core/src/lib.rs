//! Types shared by every draftsmith stage and free of burn: draft trees (and later recipes,
//! manifests and metric definitions).

pub mod beams;
pub mod tree;

pub use beams::{dedup_prefix, pack_beams, unpacked_len, PackedBeams};
pub use tree::DraftTree;
