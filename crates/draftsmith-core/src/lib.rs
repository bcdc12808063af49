//! Types shared by every draftsmith stage and free of burn: draft trees (and later recipes,
//! manifests and metric definitions).

pub mod beams;
pub mod digest;
pub mod fsio;
pub mod seq;
pub mod tree;

pub use beams::{
    beam_search, dedup_prefix, pack_beams, top_k_log_probs, unpacked_len, BeamDrafter, BeamSearchConfig, Beams,
    PackedBeams,
};
pub use seq::common_prefix;
pub use tree::DraftTree;
