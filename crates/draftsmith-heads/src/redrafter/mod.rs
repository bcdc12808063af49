//! ReDrafter (Cheng et al., 2024; apple/ml-recurrent-drafter): an RNN over the target's frozen
//! token embeddings, conditioned on the target's final hidden state, with a ResBlock head.

pub mod config;
pub mod export;
pub mod loss;
pub mod model;
pub mod reference;

pub use config::{HeadKind, ReDrafterConfig};
pub use export::{
    load_redrafter, read_drafter_file, save_redrafter, weights_path, DrafterFile, CONFIG_FILE, WEIGHTS_FILE,
};
pub use loss::{teacher_forced_loss, SoftLabels, TrainBatch};
pub use model::{ReDrafter, VocabProjection};
pub use reference::{save_reference, write_probe, PROBE_FILE, REFERENCE_MODEL_TYPE, REFERENCE_WEIGHTS_FILE};
