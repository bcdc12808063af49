//! The draftsmith target engine: Llama-family decoders in burn with explicit positions and
//! attention masks (so a flattened draft tree verifies in one pass), a KV cache kept outside
//! the model, and loaders for GGUF files and Hugging Face directories.

pub mod cache;
pub mod chat;
pub mod config;
pub mod driver;
mod embed;
pub mod error;
pub mod fingerprint;
pub mod fused;
pub mod host;
pub mod layers;
pub mod load;
pub mod model;
pub mod names;
pub mod source;
pub mod stream;
pub mod tokenizer;

pub use cache::KvCache;
pub use chat::{ChatMessage, ChatTemplate};
pub use config::{Architecture, HfConfig, ModelConfig, RopeScaling};
pub use draftsmith_kernels::{Activations, QFormat};
pub use driver::cuda_driver_present;
pub use error::ModelError;
pub use fingerprint::weights_sha256;
pub use fused::{set_profiling, take_profile, ProfileSplit};
pub use load::{
    build_model, load_model, KvKeys, LoadOptions, LoadedModel, MatmulWeights, SourceKind, DEFAULT_ACTIVATIONS,
};
pub use model::{host_f32, AttentionMask, ForwardOutput, HiddenOutput, LogitsSelect, MatrixFootprint, Model};
pub use source::{MemorySource, WeightSource};
pub use stream::TextStream;
pub use tokenizer::TextTokenizer;
