//! Types shared by every draftsmith stage and free of burn: draft trees (and later recipes,
//! manifests and metric definitions).

pub mod tree;

pub use tree::DraftTree;
