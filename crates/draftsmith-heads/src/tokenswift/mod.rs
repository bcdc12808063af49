//! TokenSwift (Wu et al., 2025; bigai-nlco/TokenSwift): γ chained residual linear heads on the
//! target's last hidden state *before* its final norm, decoded through the target's own frozen
//! LM head. With the target's own next-token distribution (p0) a forward yields γ + 1
//! distributions: p0 for the token after the input, head i for the one i positions further.

pub mod config;
pub mod export;
pub mod loss;
pub mod model;

pub use config::TokenSwiftConfig;
pub use export::{load_tokenswift, read_tokenswift_file, save_tokenswift, TokenSwiftFile};
pub use loss::{shifted_loss, TokenSwiftBatch};
pub use model::{TokenSwiftHead, TokenSwiftHeads};
